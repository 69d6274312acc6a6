import { eq } from "drizzle-orm";
import type { SettingsStore } from "../repository.ts";
import type { StoreGate } from "../shared/gate.ts";
import type { SqliteDb } from "./open.ts";
import { settings } from "./schema.ts";

/** Named values on SQLite: one row each, upserted. */
export function createSqliteSettings(db: SqliteDb, gate: StoreGate): SettingsStore {
  return {
    async getSetting(name) {
      return db.select({ value: settings.value }).from(settings).where(eq(settings.name, name)).get()?.value ?? null;
    },

    async setSetting(name, value) {
      gate.assertOpen();
      db.insert(settings).values({ name, value }).onConflictDoUpdate({ target: settings.name, set: { value } }).run();
    },
  };
}
