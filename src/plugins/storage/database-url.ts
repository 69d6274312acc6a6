/** Where the store lives, parsed from `database_url`. */
export type DatabaseTarget = { dialect: "sqlite"; path: string } | { dialect: "postgres"; url: string };

/** `sqlite:PATH`, `sqlite://PATH`, a bare path or `:memory:`; `postgres://` / `postgresql://` URLs. */
export function parseDatabaseUrl(url: string): DatabaseTarget {
  const text = url.trim();
  if (/^postgres(ql)?:\/\//i.test(text)) return { dialect: "postgres", url: text };
  let path = text;
  if (/^sqlite:\/\//i.test(path)) path = path.slice("sqlite://".length);
  else if (/^sqlite:/i.test(path)) path = path.slice("sqlite:".length);
  if (path === "") throw new Error(`database_url "${url}" names no SQLite file`);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(path)) throw new Error(`database_url "${url}": unsupported scheme`);
  return { dialect: "sqlite", path };
}
