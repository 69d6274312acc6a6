/**
 * Search text as both stores compare it: A-Z folded to a-z and every other character kept. SQLite's
 * lower() folds only ASCII (no ICU), Postgres's would fold É too; folding ASCII alone on both sides of
 * both stores makes them find the same rows.
 */
export function foldAscii(text: string): string {
  return text.replace(/[A-Z]+/g, (letters) => letters.toLowerCase());
}

export const ASCII_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
export const ASCII_LOWER = "abcdefghijklmnopqrstuvwxyz";
