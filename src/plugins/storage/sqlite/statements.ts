import type { Database, Statement } from "bun:sqlite";
import { is, Param, Placeholder } from "drizzle-orm";

type Values = object;

/**
 * A drizzle query compiled once to a raw bun:sqlite statement with a positional binder: the query is
 * still written with drizzle (portable, typed against the tables), but the hot path skips drizzle's
 * per-call placeholder filling and result mapping. Values must already be driver values
 * (JSON as text; booleans bind as 1 / 0).
 */
export function compileStatement(client: Database, query: { toSQL(): { sql: string; params: unknown[] } }) {
  const { sql, params } = query.toSQL();
  const statement: Statement = client.prepare(sql);
  const names: (string | null)[] = [];
  const constants: unknown[] = [];
  for (const param of params) {
    if (is(param, Placeholder)) names.push(param.name);
    else if (is(param, Param) && is(param.value, Placeholder)) names.push(param.value.name);
    else names.push(null);
    constants.push(is(param, Param) ? param.encoder.mapToDriverValue(param.value) : param);
  }
  const count = names.length;
  function bind(values: Values): any[] {
    const args = new Array(count);
    for (let i = 0; i < count; i++) {
      const name = names[i];
      if (name === null) {
        args[i] = constants[i];
      } else {
        const value = (values as Record<string, unknown>)[name];
        if (value === undefined) throw new TypeError(`no value for "${name}" in: ${sql}`);
        args[i] = value;
      }
    }
    return args;
  }
  return {
    sql,
    /** Runs it; the number of rows changed (0 for `insert … on conflict do nothing` that skipped). */
    run(values: Values): number {
      return statement.run(...bind(values)).changes;
    },
    /** First row or null (e.g. `insert … on conflict do nothing returning id`: null when skipped). */
    get(values: Values): unknown {
      return statement.get(...bind(values));
    },
    /** Every row, as objects keyed by the selected names (aliases included), with no per-row mapping. */
    all(values: Values): unknown[] {
      return statement.all(...bind(values));
    },
  };
}
