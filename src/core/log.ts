/** One JSON object per line on stdout; `tag` is the plugin name or "core". */
export interface Logger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  /** A request's access line. */
  request(fields: Record<string, unknown>): void;
  child(tag: string): Logger;
}

const silent = process.env.GATEWAY_LOG === "silent";

export function createLogger(tag = "core", options: { silent?: boolean } = {}): Logger {
  const quiet = options.silent ?? silent;
  function write(level: string, message: string, fields?: Record<string, unknown>) {
    if (quiet) return;
    process.stdout.write(JSON.stringify({ time: new Date().toISOString(), level, tag, message, ...fields }) + "\n");
  }
  return {
    info: (message, fields) => write("info", message, fields),
    warn: (message, fields) => write("warn", message, fields),
    error: (message, fields) => write("error", message, fields),
    request: (fields) => write("info", "request", fields),
    child: (child) => createLogger(child, options),
  };
}
