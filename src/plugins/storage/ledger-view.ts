/**
 * The query of the `ledger` view, the same in both dialects: every money movement of every account,
 * signed. Credits (> 0) and plan purchases (< 0) are rows of `ledger_entries`; a request's usage debit
 * is its generation row (`-total_cost_nano`, referenced by the request id). SUM(amount_nano) of an
 * account is credits − debits, the maintained totals.
 */
export const LEDGER_VIEW_QUERY = `select id, account_id, kind, amount_nano, reference, created_at from ledger_entries
union all
select id, account_id, 'usage', -total_cost_nano, id, created_at from generations where total_cost_nano > 0`;
