import type { ReservedSQL, SQL } from "bun";

/**
 * Statements of one connection sent together: Bun's client writes a query without waiting for the
 * replies of those before it (once the connection has prepared its statement), and the server runs
 * them in order, so N statements cost one round trip instead of N. Queries are lazy and start in array
 * order here. Resolves with the results in order; rejects with the error of the FIRST statement that
 * failed (in a transaction the later ones then fail with "transaction aborted", 25P02, which would hide
 * the cause: the group commit tells a poison row, 22/23, from a passing failure by it).
 */
export async function pipelined(statements: readonly PromiseLike<unknown>[]): Promise<any[]> {
  const settled = await Promise.allSettled(statements);
  const results: unknown[] = [];
  for (const outcome of settled) {
    if (outcome.status === "rejected") throw outcome.reason;
    results.push(outcome.value);
  }
  return results;
}

/**
 * A READ COMMITTED transaction on a reserved connection whose BEGIN goes out with its first statements
 * and whose COMMIT goes out with its last ones: a transaction of two dependent steps costs two round
 * trips, where `sql.begin` spends one more on BEGIN and one more on COMMIT (and BEGIN / COMMIT are
 * sent as tagged templates: Bun pipelines those, not parameterless `unsafe` text).
 */
export class PipelinedTransaction {
  private begun = false;
  private ended = false;

  constructor(readonly sql: ReservedSQL) {}

  /** COMMIT (or ROLLBACK) sent. */
  get finished(): boolean {
    return this.ended;
  }

  /** Sends the statements (behind BEGIN the first time) and waits once for all of them. */
  run(statements: readonly PromiseLike<unknown>[]): Promise<any[]> {
    if (this.ended) throw new Error("transaction already ended");
    if (this.begun) return pipelined(statements);
    this.begun = true;
    return pipelined([this.sql`begin`, ...statements]).then((results) => results.slice(1));
  }

  /**
   * Sends the last statements and COMMIT together. A failing statement makes the server answer the
   * COMMIT with a rollback; its error is thrown. When the reply is lost, the outcome is unknown.
   */
  async commit(statements: readonly PromiseLike<unknown>[] = []): Promise<any[]> {
    if (!this.begun) {
      // Nothing sent yet: no transaction needed around a single round trip.
      this.begun = true;
      this.ended = true;
      if (statements.length === 0) return [];
      return pipelined([this.sql`begin`, ...statements, this.sql`commit`]).then((results) => results.slice(1, -1));
    }
    this.ended = true;
    return pipelined([...statements, this.sql`commit`]).then((results) => results.slice(0, -1));
  }

  /** @internal */
  async abort(): Promise<void> {
    if (!this.begun || this.ended) return;
    this.ended = true;
    await this.sql`rollback`;
  }
}

/**
 * Runs `work` in a pipelined transaction on a connection of the pool; commits when `work` did not (with
 * no statements), rolls back when it throws. The connection goes back to the pool either way (a broken
 * one is dropped by the pool).
 */
export async function pipelinedTransaction<T>(client: SQL, work: (tx: PipelinedTransaction) => Promise<T>): Promise<T> {
  const connection = await client.reserve();
  const tx = new PipelinedTransaction(connection);
  try {
    const result = await work(tx);
    if (!tx.finished) await tx.commit();
    return result;
  } catch (error) {
    await tx.abort().catch(() => {});
    throw error;
  } finally {
    await Promise.resolve(connection.release()).catch(() => {});
  }
}
