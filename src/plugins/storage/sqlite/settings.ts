import { eq } from "drizzle-orm";
import type { SettingsStore } from "../repository.ts";
import type { StoreGate } from "../shared/gate.ts";
import type { SqliteDb } from "./open.ts";
import { settings } from "./schema.ts";

/** Named values on SQLite: one row each, upserted; a claim is an insert that does nothing when the name is taken. */
export function createSqliteSettings(db: SqliteDb, gate: StoreGate): SettingsStore {
  return {
    async getSetting(name) {
      return db.select({ value: settings.value }).from(settings).where(eq(settings.name, name)).get()?.value ?? null;
    },

    async setSetting(name, value) {
      gate.assertOpen();
      db.insert(settings).values({ name, value }).onConflictDoUpdate({ target: settings.name, set: { value } }).run();
    },

    async claimSetting(name, value) {
      gate.assertOpen();
      const row = db.insert(settings).values({ name, value }).onConflictDoNothing({ target: settings.name }).returning({ name: settings.name }).get();
      return row !== undefined;
    },

    async deleteSetting(name) {
      gate.assertOpen();
      db.delete(settings).where(eq(settings.name, name)).run();
    },
  };
}
