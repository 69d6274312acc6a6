import { UnavailableError } from "../../../core/errors.ts";
import { createLogger, type Logger } from "../../../core/log.ts";
import type { Repository, StoreLifecycle } from "../repository.ts";
import { StoreGate } from "../shared/gate.ts";
import { createGroupCommit } from "../shared/group-commit.ts";
import { PendingGenerations } from "../shared/pending.ts";
import { createPostgresAccounts } from "./accounts.ts";
import { isPermanent, storeError } from "./errors.ts";
import { createPostgresInstances } from "./instances.ts";
import { createPostgresKeys } from "./keys.ts";
import { createPostgresLedger } from "./ledger.ts";
import { createPostgresMetering } from "./metering.ts";
import { createMeteringWriter } from "./metering-writer.ts";
import { openPostgres, type OpenPostgresOptions } from "./open.ts";
import { createPostgresPayments } from "./payments.ts";
import { createPostgresPlans, postgresPlanStore } from "./plans.ts";
import { createPostgresReservations, postgresReservationStore } from "./reservations.ts";
import { createPostgresSessions } from "./sessions.ts";
import { createPostgresSettings } from "./settings.ts";
import { createPostgresUsers } from "./users.ts";

export interface PostgresRepositoryOptions extends OpenPostgresOptions {
  /** Group-commit period (default 5 ms). */
  flushIntervalMs?: number;
  /** A queue this long is flushed at once (default 512); also the size of one transaction. */
  maxBatch?: number;
  log?: Logger;
}

/**
 * The multi-instance store on Postgres (Bun's built-in SQL client, drizzle's bun-sql driver):
 * migrations at start under an advisory lock, group-committed metering with a read overlay,
 * reservations serialized per account by row locks. Same contract and semantics as the SQLite store.
 * Opens the pool and the pieces every domain shares, then composes one slice per domain
 * (accounts.ts, ledger.ts, keys.ts, metering.ts, ...).
 */
export async function createPostgresRepository(url: string, options: PostgresRepositoryOptions = {}): Promise<Repository> {
  const flushIntervalMs = Math.max(1, options.flushIntervalMs ?? 5);
  const maxBatch = Math.max(1, options.maxBatch ?? 512);
  const log = options.log ?? createLogger("storage");
  const { client, db } = await openPostgres(url, options);
  const pending = new PendingGenerations();
  const gate = new StoreGate();
  const writer = createMeteringWriter(client);
  const reservations = createPostgresReservations(client, pending);
  const plans = createPostgresPlans(client, pending);
  const commits = createGroupCommit({ pending, write: writer.write, isPermanent, flushIntervalMs, maxBatch, log });

  const lifecycle: StoreLifecycle = {
    async ping() {
      try {
        gate.assertOpen();
        await client.unsafe("select 1");
      } catch (error) {
        const mapped = storeError(error);
        throw mapped instanceof UnavailableError ? mapped : new UnavailableError("storage unavailable", { cause: error });
      }
    },

    async close() {
      if (gate.closed) return;
      gate.closed = true; // new writes are refused from here
      await commits.stop();
      await reservations.stop();
      await client.close();
    },

    onCommit: (listener) => commits.onCommit(listener),
  };

  return {
    ...createPostgresAccounts(db, gate),
    ...createPostgresLedger(client, db, pending, gate),
    ...createPostgresKeys(client, db, pending, gate),
    ...createPostgresMetering(db, pending, commits, gate),
    ...postgresReservationStore(reservations, gate),
    ...postgresPlanStore(plans, gate),
    ...createPostgresInstances(reservations, gate),
    ...createPostgresSettings(db, gate),
    ...createPostgresUsers(db, gate),
    ...createPostgresSessions(db, gate),
    ...createPostgresPayments(client, gate, plans),
    ...lifecycle,
  };
}
