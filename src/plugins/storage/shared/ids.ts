/**
 * A short prefixed id: `acct_…`, `key_…`, `le_…`. Time-ordered (UUIDv7: 48-bit ms time + 74 random
 * bits) so inserts append to the right edge of the primary-key index instead of dirtying random pages.
 */
export function newId(prefix: string): string {
  return prefix + "_" + Bun.randomUUIDv7().replaceAll("-", "");
}
