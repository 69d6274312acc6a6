import { InvalidRequestError } from "../../core/errors.ts";
import { ID_PATTERN, PRINTABLE } from "./schema.ts";
import { parseTimestamp } from "./timestamp.ts";

/** Rows per page of the admin lists (accounts, keys): 1 to 100, 20 when not given. */
export const LIST_LIMIT_DEFAULT = 20;
export const LIST_LIMIT_MAX = 100;
const SEARCH_MAX = 200;

/**
 * A list's query string, strictly: only the `allowed` names, each at most once. Read from the URL, since
 * Elysia's query object drops unknown names and keeps the last of repeated ones (`?limt=5` would be
 * silently ignored, `?limit=5&limit=500` silently 500).
 */
export function listParams(request: Request, allowed: readonly string[]): Map<string, string> {
  const params = new Map<string, string>();
  for (const [name, value] of new URL(request.url).searchParams) {
    if (!allowed.includes(name)) {
      const clipped = name.length > 40 ? name.slice(0, 40) + "…" : name;
      throw new InvalidRequestError(`unknown query parameter ${JSON.stringify(clipped)}; this list takes ${allowed.join(", ")}`, { param: clipped });
    }
    if (params.has(name)) throw new InvalidRequestError(`${name} is given more than once`, { param: name });
    params.set(name, value);
  }
  return params;
}

/** `limit`: an integer from 1 to 100; absent: 20. An empty value is an error, not the default. */
export function parseListLimit(value: string | undefined): number {
  if (value === undefined) return LIST_LIMIT_DEFAULT;
  const limit = /^\d{1,3}$/.test(value) ? Number(value) : NaN;
  if (!(limit >= 1 && limit <= LIST_LIMIT_MAX)) {
    throw new InvalidRequestError(`limit must be an integer from 1 to ${LIST_LIMIT_MAX} (default ${LIST_LIMIT_DEFAULT})`, { param: "limit" });
  }
  return limit;
}

const PRINTABLE_TEXT = new RegExp(PRINTABLE);

/** `q`: 1 to 200 characters without control characters or unpaired surrogates, as names are. */
export function parseSearch(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (value.length < 1 || value.length > SEARCH_MAX || !PRINTABLE_TEXT.test(value)) {
    throw new InvalidRequestError(`q must be 1 to ${SEARCH_MAX} characters, without control characters (NUL included) or unpaired surrogates`, {
      param: "q",
    });
  }
  return value;
}

/** Where a page starts: after the row with this id (a `next_before`), or strictly before a time. */
export type ListCursor = { id: string } | { before: number };

const ID = new RegExp(ID_PATTERN);

/** `before`: a `next_before` (the id of the last row of the previous page), an epoch-ms number or an RFC 3339 time. */
export function parseListCursor(value: string | undefined, rows: string): ListCursor | undefined {
  if (value === undefined) return undefined;
  // At most 15 digits (year 33658): always a safe integer for both stores' bigint columns.
  if (/^\d{1,15}$/.test(value)) return { before: Number(value) };
  // An offset's "+" left unencoded in a query string arrives as a space.
  if (/^\d{4}-/.test(value)) return { before: parseTimestamp(value.replace(/ (\d{2}:\d{2})$/, "+$1"), "before") };
  if (ID.test(value) && !/^\d+$/.test(value)) return { id: value };
  throw new InvalidRequestError(`before must be the id of ${rows} (a next_before), an epoch-ms number or an RFC 3339 time`, { param: "before" });
}

/** One page of a list: `rows` were read with limit + 1, so whether more follow is known without another read. */
export function listPage<Row extends { id: string }, View>(rows: Row[], limit: number, view: (row: Row) => View) {
  const hasMore = rows.length > limit;
  const shown = hasMore ? rows.slice(0, limit) : rows;
  return { data: shown.map(view), has_more: hasMore, next_before: hasMore ? shown[shown.length - 1]!.id : null };
}
