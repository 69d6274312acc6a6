import type { InstanceStore } from "../repository.ts";
import type { StoreGate } from "../shared/gate.ts";
import { guard } from "./errors.ts";
import type { PostgresReservations } from "./reservations.ts";

/** Gateway processes on one database: heartbeats, and the holds a dead one leaves behind (reservations.ts). */
export function createPostgresInstances(reservations: PostgresReservations, gate: StoreGate): InstanceStore {
  return {
    heartbeat: (instanceId, now) =>
      guard(async () => {
        gate.assertOpen();
        await reservations.heartbeat(instanceId, now);
      }),

    releaseStaleReservations: (aliveSince) =>
      guard(async () => {
        gate.assertOpen();
        return reservations.releaseStaleReservations(aliveSince);
      }),

    removeInstance: (instanceId) =>
      guard(async () => {
        gate.assertOpen();
        await reservations.removeInstance(instanceId);
      }),
  };
}
