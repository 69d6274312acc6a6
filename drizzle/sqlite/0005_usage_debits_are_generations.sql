-- Usage debits are the generations themselves from here on (read both through the ledger view): the ledger
-- rows that only repeat a stored generation (same id, same amount) go; any other row stays.
DELETE FROM `ledger_entries` WHERE `kind` = 'usage' AND EXISTS (SELECT 1 FROM `generations` g WHERE g.`id` = `ledger_entries`.`generation_id` AND g.`total_cost_nano` = -`ledger_entries`.`amount_nano`);--> statement-breakpoint
CREATE VIEW `ledger` AS select id, account_id, kind, amount_nano, reference, created_at from ledger_entries
union all
select id, account_id, 'usage', -total_cost_nano, id, created_at from generations where total_cost_nano > 0;