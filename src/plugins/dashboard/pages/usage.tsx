import type { NanoUsd } from "../../../core/money.ts";
import { parseUtcDay, usageWindow, utcDayString } from "../../cost-api/dates.ts";
import type { UsageRow } from "../../storage/repository.ts";
import { HIDDEN, type PageModule } from "../deps.ts";
import { Layout } from "../layout.tsx";
import { html, usd } from "../web.ts";

const DAY_MS = 86_400_000;
/** The windows the page offers, in days ending today (UTC); the default is the API's (30 days). */
export const USAGE_WINDOWS = [7, 30, 92] as const;
const DEFAULT_DAYS = 30;

/** A whole number with thousands separators (1,234,567). */
export function count(value: number): string {
  return value.toLocaleString("en-US");
}

/** One day and model of the report: the API's counters, the cost kept in integer nano-USD. */
interface Cell {
  day: string;
  model: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  cost: NanoUsd;
}

/**
 * The page's window: `days` days ending today (UTC), through the cost API's own `usageWindow` (so
 * `/v1/usage?start_date=…&end_date=…` with these days is the same report; 30 days is its default).
 */
export function usageDays(days: number, now: number): { startDay: string; endDay: string } {
  const { endDay } = usageWindow({}, now);
  const startDay = utcDayString(parseUtcDay(endDay, "end_date") - (days - 1) * DAY_MS);
  return usageWindow({ start_date: startDay, end_date: endDay }, now);
}

/** The store's roll-ups summed per (day, model) as `/v1/usage`'s report sums them: integers, no rounding. */
function cells(rows: UsageRow[]): Cell[] {
  const byKey = new Map<string, Cell>();
  for (const row of rows) {
    const key = `${row.day}\u0000${row.model}`;
    let cell = byKey.get(key);
    if (!cell) byKey.set(key, (cell = { day: row.day, model: row.model, requests: 0, promptTokens: 0, completionTokens: 0, cachedTokens: 0, cost: 0 }));
    cell.requests += row.requests;
    cell.promptTokens += row.promptTokens;
    cell.completionTokens += row.completionTokens;
    cell.cachedTokens += row.cachedTokens;
    cell.cost += row.cost;
  }
  return [...byKey.values()].sort((a, b) => (a.day !== b.day ? (a.day < b.day ? -1 : 1) : a.model < b.model ? -1 : a.model > b.model ? 1 : 0));
}

/** Colors of the chart's series (fill attributes, not styles: the CSP allows them); models past the last reuse them. */
const PALETTE = ["#1f5fbf", "#e07b00", "#2a9d5b", "#b8336a", "#6a4fb3", "#0f8b99", "#8c6d1f", "#5b6470"];

/** Every day of the window, ascending. */
function daysOf(startDay: string, endDay: string): string[] {
  const days: string[] = [];
  for (let day = parseUtcDay(startDay, "start_date"); day <= parseUtcDay(endDay, "end_date"); day += DAY_MS) days.push(utcDayString(day));
  return days;
}

/** The largest daily total rounded up to a round figure (1, 2 or 5 times a power of ten), in nano-USD. */
function niceCeiling(nano: NanoUsd): NanoUsd {
  if (nano <= 0) return 1;
  let step = 1;
  while (step * 10 <= nano) step *= 10;
  for (const factor of [1, 2, 5, 10]) if (step * factor >= nano) return step * factor;
  return step * 10;
}

/** Stacked bars per day by model, drawn on the server: no script, no library. */
function Chart(props: { days: string[]; cells: Cell[]; models: string[]; total: NanoUsd; requests: number; startDay: string; endDay: string }): JSX.Element {
  const width = 960;
  const height = 280;
  const left = 90;
  const right = 10;
  const top = 12;
  const bottom = 34;
  const plotWidth = width - left - right;
  const plotHeight = height - top - bottom;
  const perDay = new Map<string, Cell[]>();
  for (const cell of props.cells) perDay.set(cell.day, [...(perDay.get(cell.day) ?? []), cell]);
  const dayTotals = props.days.map((day) => (perDay.get(day) ?? []).reduce((sum, cell) => sum + cell.cost, 0));
  const ceiling = niceCeiling(Math.max(0, ...dayTotals));
  const slot = plotWidth / props.days.length;
  const barWidth = Math.max(1, slot * 0.75);
  const color = (model: string) => PALETTE[props.models.indexOf(model) % PALETTE.length]!;
  const y = (nano: NanoUsd) => top + plotHeight - (nano / ceiling) * plotHeight; // drawing only: every figure shown is exact
  const labelEvery = Math.ceil(props.days.length / 8); // counted back from the last day: today always has its label
  const summary = `Daily cost by model, ${props.startDay} to ${props.endDay} (UTC): total ${usd(props.total)} over ${count(props.requests)} requests, ${props.models.length} model${props.models.length === 1 ? "" : "s"}`;
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${width} ${height}`} role="img" aria-label={summary} xmlns="http://www.w3.org/2000/svg">
        {[0, 0.5, 1].map((share) => (
          <>
            <line x1={left} x2={width - right} y1={y(ceiling * share)} y2={y(ceiling * share)} stroke="#d9dee4" />
            <text x={left - 6} y={y(ceiling * share) + 4} text-anchor="end" font-size="12" fill="#5b6470">
              {usd(Math.round(ceiling * share))}
            </text>
          </>
        ))}
        {props.days.map((day, index) => {
          let base = 0;
          const x = left + index * slot + (slot - barWidth) / 2;
          return (
            <g>
              {(perDay.get(day) ?? [])
                .filter((cell) => cell.cost > 0)
                .map((cell) => {
                  const y0 = y(base);
                  base += cell.cost;
                  const y1 = y(base);
                  return (
                    <rect x={x} y={y1} width={barWidth} height={Math.max(0.5, y0 - y1)} fill={color(cell.model)}>
                      <title safe>{`${day} · ${cell.model}: ${usd(cell.cost)}`}</title>
                    </rect>
                  );
                })}
              {(props.days.length - 1 - index) % labelEvery === 0 ? (
                <text x={left + index * slot + slot / 2} y={height - 12} text-anchor="middle" font-size="11" fill="#5b6470" safe>
                  {day.slice(5)}
                </text>
              ) : (
                ""
              )}
            </g>
          );
        })}
      </svg>
      <figcaption>
        <ul class="legend" aria-label="Models">
          {props.models.map((model) => (
            <li>
              <svg class="swatch" viewBox="0 0 10 10" aria-hidden="true" xmlns="http://www.w3.org/2000/svg">
                <rect width="10" height="10" fill={color(model)} />
              </svg>
              <span safe>{model}</span>
            </li>
          ))}
        </ul>
        <span safe>{summary + "."}</span>
      </figcaption>
    </figure>
  );
}

/** GET /dashboard/usage?days=7|30|92: the account's daily cost by model, the numbers of `GET /v1/usage` for the same days. */
export const usagePages: PageModule = (app, deps) => {
  app.get(
    "/dashboard/usage",
    ({ request, query }) =>
      deps.userPage(request, async (viewer) => {
        const asked = Number((query as Record<string, string | undefined>).days);
        const days = (USAGE_WINDOWS as readonly number[]).includes(asked) ? asked : DEFAULT_DAYS;
        const { startDay, endDay } = usageDays(days, deps.now());
        const rows = await deps.store.usageByDay({ accountId: viewer.account.id, startDay, endDay });
        const table = cells(rows);
        const total = { requests: 0, promptTokens: 0, completionTokens: 0, cachedTokens: 0, cost: 0 };
        const byModel = new Map<string, NanoUsd>();
        for (const cell of table) {
          total.requests += cell.requests;
          total.promptTokens += cell.promptTokens;
          total.completionTokens += cell.completionTokens;
          total.cachedTokens += cell.cachedTokens;
          total.cost += cell.cost;
          byModel.set(cell.model, (byModel.get(cell.model) ?? 0) + cell.cost);
        }
        // The legend and the stacking order: the costliest model first (at the bottom of each bar).
        const models = [...byModel.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([model]) => model);
        const ordered = [...table].sort((a, b) => (a.day !== b.day ? (a.day < b.day ? -1 : 1) : models.indexOf(a.model) - models.indexOf(b.model)));
        return html(
          <Layout title="Usage" viewer={viewer} active="usage">
            <nav class="windows" aria-label="Window">
              {USAGE_WINDOWS.map((n) => (
                <a href={`/dashboard/usage?days=${n}`} aria-current={n === days ? "page" : undefined}>
                  {`${n} days`}
                </a>
              ))}
            </nav>
            <p class="muted" id="usage-window">
              {"Days in UTC, "}
              <time datetime={startDay} safe>{startDay}</time>
              {" to "}
              <time datetime={endDay} safe>{endDay}</time>
              {` (${days} days, today included): the figures of `}
              <code safe>{`GET /v1/usage?start_date=${startDay}&end_date=${endDay}`}</code>.
            </p>
            {table.length === 0 ? (
              <p class="notice">No usage in these {days} days.</p>
            ) : (
              <>
                <Chart days={daysOf(startDay, endDay)} cells={ordered} models={models} total={total.cost} requests={total.requests} startDay={startDay} endDay={endDay} />
                <table aria-label="Usage by day and model">
                  <thead>
                    <tr>
                      <th scope="col">Day (UTC)</th>
                      <th scope="col">Model</th>
                      <th scope="col" class="num">Requests</th>
                      <th scope="col" class="num">Prompt tokens</th>
                      <th scope="col" class="num">Completion tokens</th>
                      <th scope="col" class="num">Cached tokens</th>
                      <th scope="col" class="num">Cost (USD)</th>
                    </tr>
                  </thead>
                  <tbody>
                    {ordered.map((cell) => (
                      <tr>
                        <td safe>{cell.day}</td>
                        <td safe>{cell.model}</td>
                        <td class="num">{count(cell.requests)}</td>
                        <td class="num">{count(cell.promptTokens)}</td>
                        <td class="num">{count(cell.completionTokens)}</td>
                        <td class="num">{count(cell.cachedTokens)}</td>
                        <td class="num">{usd(cell.cost)}</td>
                      </tr>
                    ))}
                  </tbody>
                  <tfoot>
                    <tr>
                      <th scope="row" colspan="2">
                        Total
                      </th>
                      <td class="num">{count(total.requests)}</td>
                      <td class="num">{count(total.promptTokens)}</td>
                      <td class="num">{count(total.completionTokens)}</td>
                      <td class="num">{count(total.cachedTokens)}</td>
                      <td class="num">{usd(total.cost)}</td>
                    </tr>
                  </tfoot>
                </table>
              </>
            )}
          </Layout>,
        );
      }),
    HIDDEN,
  );
};
