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

/** Workers whose holds live in their primary (primary-holds.ts): the primary drops those of a worker that exits. */
export function primaryHeldInstances(gate: StoreGate): InstanceStore {
  return {
    async heartbeat() {
      gate.assertOpen();
    },
    async releaseStaleReservations() {
      gate.assertOpen();
      return 0;
    },
    async removeInstance() {
      gate.assertOpen();
    },
  };
}
