import type { SQL } from "bun";
import { and, desc, eq, ne } from "drizzle-orm";
import { InvalidRecordError, RecordConflictError, RecordNotFoundError } from "../errors.ts";
import type { AccountTotals, CreditInput, CreditResult, LedgerStore } from "../repository.ts";
import { checkCredit, CREDITS_CAP_MESSAGE, PAID_KINDS, toLedgerEntry } from "../rows.ts";
import { olderThan, pageLimit } from "../shared/cursor.ts";
import type { StoreGate } from "../shared/gate.ts";
import { newId } from "../shared/ids.ts";
import type { PendingGenerations } from "../shared/pending.ts";
import { guard, isForeignKeyViolation } from "./errors.ts";
import type { PostgresDb } from "./open.ts";
import { costOf, notStored, num, storedIdsSql } from "./overlay.ts";
import { ledgerEntries } from "./schema.ts";

const TOTALS = `
select a.total_credits_nano as credits, a.total_debits_nano as debits, a.paid_credits_nano as paid, ${storedIdsSql("$2")} as stored
  from (select 1) as one left join accounts a on a.id = $1`;

/**
 * The ledger on Postgres: a credit is one transaction, exactly once per reference however many
 * gateways race; totals are the committed ones plus this process's queued debits not yet stored.
 */
export function createPostgresLedger(client: SQL, db: PostgresDb, pending: PendingGenerations, gate: StoreGate): LedgerStore {
  async function totalsOf(accountId: string): Promise<AccountTotals> {
    const queued = pending.queue.filter((g) => g.accountId === accountId);
    const [row] = await client.unsafe(TOTALS, [accountId, queued.map((g) => g.id)]);
    const credits = num(row.credits);
    const debits = num(row.debits) + costOf(notStored(queued, row.stored));
    return { credits, debits, balance: credits - debits, paidCredits: num(row.paid) };
  }

  /** Inserts the entry, or finds the one of the same reference (a replay); bumps the totals of a new one. */
  function credit(entryId: string, { accountId, amount, kind, reference }: CreditInput) {
    const paid = PAID_KINDS.has(kind) ? amount : 0;
    return client.begin(async (tx) => {
      // On a concurrent insert of the same reference, ON CONFLICT waits for that transaction and
      // then does nothing: exactly one credit per reference, however many gateways race.
      const inserted = await tx.unsafe(
        `insert into ledger_entries (id, account_id, kind, amount_nano, reference, generation_id, created_at)
           values ($1, $2, $3, $4, $5, null, $6) on conflict (reference) do nothing returning id`,
        [entryId, accountId, kind, amount, reference, Date.now()],
      );
      if (inserted.length === 1) {
        // Totals are read as JS numbers: an account's credits stay a safe integer, so every balance is exact.
        // No row updated with the row inserted (the foreign key holds): the cap; throwing rolls the insert back.
        const updated = await tx.unsafe(
          `update accounts set total_credits_nano = total_credits_nano + $1, paid_credits_nano = paid_credits_nano + $2
             where id = $3 and total_credits_nano + $1 <= $4 returning id`,
          [amount, paid, accountId, Number.MAX_SAFE_INTEGER],
        );
        if (updated.length === 0) {
          throw new InvalidRecordError(CREDITS_CAP_MESSAGE, { field: "amount" });
        }
        return { entryId, duplicate: false };
      }
      const [existing] = await tx.unsafe(`select id, account_id, amount_nano, kind from ledger_entries where reference = $1`, [reference]);
      // A replay is the same credit: account, amount and kind (a card payment is not a bonus).
      if (existing.account_id !== accountId || Number(existing.amount_nano) !== amount || existing.kind !== kind) {
        throw new RecordConflictError("reference already used for another credit", { field: "reference" });
      }
      return { entryId: existing.id as string, duplicate: true };
    });
  }

  return {
    addCredit: (input: CreditInput) =>
      guard(async (): Promise<CreditResult> => {
        gate.assertOpen();
        checkCredit(input);
        const outcome = await credit(newId("le"), input).catch((error: unknown) => {
          if (isForeignKeyViolation(error)) throw new RecordNotFoundError(`account ${input.accountId} not found`);
          throw error;
        });
        return { ...outcome, balance: (await totalsOf(input.accountId)).balance };
      }),

    accountTotals: (accountId) => guard(() => totalsOf(accountId)),

    creditTotalsByKind: () =>
      guard(async () => {
        const rows = await client.unsafe(`select kind, coalesce(sum(amount_nano), 0) as amount from ledger_entries where kind <> 'usage' group by kind`);
        return Object.fromEntries((rows as { kind: string; amount: unknown }[]).map((row) => [row.kind, num(row.amount)]));
      }),

    listLedgerEntries: (accountId, page) =>
      guard(async () => {
        const limit = pageLimit(page);
        if (limit === 0) return [];
        // Usage rows exist only in databases written before migration 0002: a request's usage is its generation.
        const rows = await db
          .select({ id: ledgerEntries.id, kind: ledgerEntries.kind, amountNano: ledgerEntries.amountNano, reference: ledgerEntries.reference, createdAt: ledgerEntries.createdAt })
          .from(ledgerEntries)
          .where(and(eq(ledgerEntries.accountId, accountId), ne(ledgerEntries.kind, "usage"), olderThan(ledgerEntries, page)))
          .orderBy(desc(ledgerEntries.createdAt), desc(ledgerEntries.id))
          .limit(limit);
        return rows.map(toLedgerEntry);
      }),
  };
}
