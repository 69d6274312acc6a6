import { eq } from "drizzle-orm";
import type { SettingsStore } from "../repository.ts";
import type { StoreGate } from "../shared/gate.ts";
import { guard } from "./errors.ts";
import type { PostgresDb } from "./open.ts";
import { settings } from "./schema.ts";

/**
 * Named values on Postgres: one row each, upserted. A claim is an insert that does nothing when the
 * name is taken: of gateways racing for a name, ON CONFLICT lets exactly one insert it.
 */
export function createPostgresSettings(db: PostgresDb, gate: StoreGate): SettingsStore {
  return {
    getSetting: (name) =>
      guard(async () => {
        const [row] = await db.select({ value: settings.value }).from(settings).where(eq(settings.name, name));
        return row?.value ?? null;
      }),

    setSetting: (name, value) =>
      guard(async () => {
        gate.assertOpen();
        await db.insert(settings).values({ name, value }).onConflictDoUpdate({ target: settings.name, set: { value } });
      }),

    claimSetting: (name, value) =>
      guard(async () => {
        gate.assertOpen();
        const rows = await db.insert(settings).values({ name, value }).onConflictDoNothing({ target: settings.name }).returning({ name: settings.name });
        return rows.length === 1;
      }),

    deleteSetting: (name) =>
      guard(async () => {
        gate.assertOpen();
        await db.delete(settings).where(eq(settings.name, name));
      }),
  };
}
