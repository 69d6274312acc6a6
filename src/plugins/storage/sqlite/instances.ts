import type { InstanceStore } from "../repository.ts";
import type { StoreGate } from "../shared/gate.ts";
import type { SqliteReservations } from "./reservations.ts";

/** Gateway processes on one file: heartbeats, and the holds a dead one leaves behind (reservations.ts). */
export function createSqliteInstances(reservations: SqliteReservations, gate: StoreGate): InstanceStore {
  return {
    async heartbeat(instanceId, now) {
      gate.assertOpen();
      reservations.heartbeat(instanceId, now);
    },

    async releaseStaleReservations(aliveSince) {
      gate.assertOpen();
      return reservations.releaseStaleReservations(aliveSince);
    },

    async removeInstance(instanceId) {
      gate.assertOpen();
      reservations.removeInstance(instanceId);
    },
  };
}
