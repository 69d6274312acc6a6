-- Usage debits are the generations themselves from here on (read both through the ledger view): the ledger
-- rows that only repeat a stored generation (same id, same amount) go; any other row stays.
DELETE FROM "ledger_entries" l USING "generations" g WHERE l."kind" = 'usage' AND g."id" = l."generation_id" AND g."total_cost_nano" = -l."amount_nano";--> statement-breakpoint
CREATE VIEW "public"."ledger" AS (select id, account_id, kind, amount_nano, reference, created_at from ledger_entries
union all
select id, account_id, 'usage', -total_cost_nano, id, created_at from generations where total_cost_nano > 0);