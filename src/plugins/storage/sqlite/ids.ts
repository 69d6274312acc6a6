/** A short prefixed random id: `acct_…`, `key_…`, `le_…` (122 random bits). */
export function newId(prefix: string): string {
  return prefix + "_" + crypto.randomUUID().replaceAll("-", "");
}
