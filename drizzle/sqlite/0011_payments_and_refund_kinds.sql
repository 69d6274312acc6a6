-- Payments (issue 29): top-ups, the processors' events applied once, unmatched transfers, account blocks,
-- subscription-paid plan cycles, and the ledger kinds refund and dispute (negative, like plan). The CHECKs
-- of ledger_entries change, which SQLite does only by rebuilding the table (every row copied, its two
-- indexes re-made); the `ledger` view reads that table, so it is dropped first and made again, unchanged.
CREATE TABLE `payment_events` (
	`id` text PRIMARY KEY NOT NULL,
	`processor` text NOT NULL,
	`type` text NOT NULL,
	`topup_id` text,
	`amount_nano` integer DEFAULT 0 NOT NULL,
	`received_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `payment_events_received_idx` ON `payment_events` (`received_at`);--> statement-breakpoint
CREATE TABLE `topups` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`method` text NOT NULL,
	`amount_nano` integer NOT NULL,
	`status` text NOT NULL,
	`processor_ref` text,
	`checkout_url` text,
	`payment_ref` text,
	`network` text,
	`pay_to` text,
	`pay_amount_micro` integer,
	`flag` text,
	`taken_back_nano` integer DEFAULT 0 NOT NULL,
	`expires_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action,
	CONSTRAINT "topup_taken_back_check" CHECK("topups"."taken_back_nano" >= 0 and "topups"."taken_back_nano" <= "topups"."amount_nano")
);
--> statement-breakpoint
CREATE INDEX `topups_account_created_idx` ON `topups` (`account_id`,`created_at`);--> statement-breakpoint
CREATE UNIQUE INDEX `topups_payment_ref_idx` ON `topups` (`payment_ref`) WHERE "topups"."payment_ref" is not null;--> statement-breakpoint
CREATE INDEX `topups_network_pay_to_status_idx` ON `topups` (`network`,`pay_to`,`status`);--> statement-breakpoint
CREATE INDEX `topups_pending_expires_idx` ON `topups` (`expires_at`) WHERE "topups"."status" = 'pending';--> statement-breakpoint
CREATE TABLE `unmatched_transfers` (
	`id` text PRIMARY KEY NOT NULL,
	`network` text NOT NULL,
	`token` text NOT NULL,
	`from_address` text NOT NULL,
	`to_address` text NOT NULL,
	`amount_micro` integer NOT NULL,
	`at` integer NOT NULL,
	`reason` text NOT NULL,
	`recorded_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `unmatched_transfers_recorded_idx` ON `unmatched_transfers` (`recorded_at`,`id`);--> statement-breakpoint
DROP VIEW `ledger`;--> statement-breakpoint
PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_ledger_entries` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`kind` text NOT NULL,
	`amount_nano` integer NOT NULL,
	`reference` text NOT NULL,
	`generation_id` text,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`generation_id`) REFERENCES `generations`(`id`) ON UPDATE no action ON DELETE no action,
	CONSTRAINT "ledger_kind_check" CHECK("__new_ledger_entries"."kind" in ('card', 'usdt', 'bonus', 'voucher', 'promotional', 'usage', 'plan', 'refund', 'dispute')),
	CONSTRAINT "ledger_sign_check" CHECK(("__new_ledger_entries"."kind" = 'usage' and "__new_ledger_entries"."amount_nano" < 0 and "__new_ledger_entries"."generation_id" is not null) or ("__new_ledger_entries"."kind" in ('plan', 'refund', 'dispute') and "__new_ledger_entries"."amount_nano" < 0) or ("__new_ledger_entries"."kind" not in ('usage', 'plan', 'refund', 'dispute') and "__new_ledger_entries"."amount_nano" > 0))
);
--> statement-breakpoint
INSERT INTO `__new_ledger_entries`("id", "account_id", "kind", "amount_nano", "reference", "generation_id", "created_at") SELECT "id", "account_id", "kind", "amount_nano", "reference", "generation_id", "created_at" FROM `ledger_entries`;--> statement-breakpoint
DROP TABLE `ledger_entries`;--> statement-breakpoint
ALTER TABLE `__new_ledger_entries` RENAME TO `ledger_entries`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE UNIQUE INDEX `ledger_entries_reference_unique` ON `ledger_entries` (`reference`);--> statement-breakpoint
CREATE INDEX `ledger_account_created_idx` ON `ledger_entries` (`account_id`,`created_at`);--> statement-breakpoint
CREATE VIEW `ledger` AS select id, account_id, kind, amount_nano, reference, created_at from ledger_entries
union all
select id, account_id, 'usage', -total_cost_nano, id, created_at from generations where total_cost_nano > 0;--> statement-breakpoint
ALTER TABLE `account_plans` ADD `subscription_ref` text;--> statement-breakpoint
CREATE INDEX `account_plans_subscription_idx` ON `account_plans` (`subscription_ref`) WHERE "account_plans"."subscription_ref" is not null;--> statement-breakpoint
ALTER TABLE `accounts` ADD `blocked_reason` text;