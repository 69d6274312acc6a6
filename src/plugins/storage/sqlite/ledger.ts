import { and, desc, eq, ne, sql } from "drizzle-orm";
import { InvalidRecordError, RecordConflictError, RecordNotFoundError } from "../errors.ts";
import type { AccountTotals, CreditInput, CreditResult, LedgerStore } from "../repository.ts";
import { checkCredit, CREDITS_CAP_MESSAGE, PAID_KINDS, toLedgerEntry } from "../rows.ts";
import { olderThan, pageLimit } from "../shared/cursor.ts";
import type { StoreGate } from "../shared/gate.ts";
import { newId } from "../shared/ids.ts";
import type { PendingGenerations } from "../shared/pending.ts";
import type { StoredView } from "./repository.ts";
import type { SqliteDb } from "./open.ts";
import { accounts, ledgerEntries } from "./schema.ts";

/**
 * The ledger on SQLite: credits in one IMMEDIATE transaction (idempotent on the reference), totals
 * read from the account's maintained columns plus its debits still queued for the group commit.
 * `storedChanged` tells the reservations that stored funds moved.
 */
export function createSqliteLedger(db: SqliteDb, pending: PendingGenerations, gate: StoreGate, storedChanged: () => void, stored: StoredView): LedgerStore {
  const selectTotals = db
    .select({ credits: accounts.totalCreditsNano, debits: accounts.totalDebitsNano, paid: accounts.paidCreditsNano })
    .from(accounts)
    .where(eq(accounts.id, sql.placeholder("id")))
    .prepare();

  function totalsOf(accountId: string): AccountTotals {
    const row = stored(() => selectTotals.get({ id: accountId }));
    const credits = row?.credits ?? 0;
    const debits = (row?.debits ?? 0) + pending.accountDebits(accountId);
    return { credits, debits, balance: credits - debits, paidCredits: row?.paid ?? 0 };
  }

  return {
    async addCredit(credit: CreditInput): Promise<CreditResult> {
      gate.assertOpen();
      checkCredit(credit);
      const { accountId, amount, kind, reference } = credit;
      return db.transaction(
        (tx) => {
          const existing = tx
            .select({ id: ledgerEntries.id, accountId: ledgerEntries.accountId, amount: ledgerEntries.amountNano, kind: ledgerEntries.kind })
            .from(ledgerEntries)
            .where(eq(ledgerEntries.reference, reference))
            .get();
          if (existing !== undefined) {
            // A replay is the same credit: account, amount and kind (a card payment is not a bonus).
            if (existing.accountId !== accountId || existing.amount !== amount || existing.kind !== kind) {
              throw new RecordConflictError("reference already used for another credit", { field: "reference" });
            }
            return { entryId: existing.id, balance: totalsOf(accountId).balance, duplicate: true };
          }
          // Totals are read as JS numbers: an account's credits stay a safe integer, so every balance is exact.
          const current = tx.select({ credits: accounts.totalCreditsNano }).from(accounts).where(eq(accounts.id, accountId)).get();
          if (current !== undefined && current.credits + amount > Number.MAX_SAFE_INTEGER) {
            throw new InvalidRecordError(CREDITS_CAP_MESSAGE, { field: "amount" });
          }
          const paid = PAID_KINDS.has(kind) ? amount : 0;
          const updated = tx
            .update(accounts)
            .set({
              totalCreditsNano: sql`${accounts.totalCreditsNano} + ${amount}`,
              paidCreditsNano: sql`${accounts.paidCreditsNano} + ${paid}`,
            })
            .where(eq(accounts.id, accountId))
            .returning({ id: accounts.id })
            .get();
          if (updated === undefined) throw new RecordNotFoundError(`account ${accountId} not found`);
          const entryId = newId("le");
          tx.insert(ledgerEntries)
            .values({ id: entryId, accountId, kind, amountNano: amount, reference, createdAt: Date.now() })
            .run();
          storedChanged();
          return { entryId, balance: totalsOf(accountId).balance, duplicate: false };
        },
        { behavior: "immediate" },
      );
    },

    async accountTotals(accountId) {
      return totalsOf(accountId);
    },

    async creditTotalsByKind() {
      const rows = db
        .select({ kind: ledgerEntries.kind, amount: sql<number>`coalesce(sum(${ledgerEntries.amountNano}), 0)` })
        .from(ledgerEntries)
        .where(ne(ledgerEntries.kind, "usage"))
        .groupBy(ledgerEntries.kind)
        .all();
      return Object.fromEntries(rows.map((row) => [row.kind, Number(row.amount)]));
    },

    async listLedgerEntries(accountId, page) {
      const limit = pageLimit(page);
      if (limit === 0) return [];
      // Usage rows exist only in files written before migration 0005: a request's usage is its generation.
      return db
        .select({ id: ledgerEntries.id, kind: ledgerEntries.kind, amountNano: ledgerEntries.amountNano, reference: ledgerEntries.reference, createdAt: ledgerEntries.createdAt })
        .from(ledgerEntries)
        .where(and(eq(ledgerEntries.accountId, accountId), ne(ledgerEntries.kind, "usage"), olderThan(ledgerEntries, page)))
        .orderBy(desc(ledgerEntries.createdAt), desc(ledgerEntries.id))
        .limit(limit)
        .all()
        .map(toLedgerEntry);
    },
  };
}
