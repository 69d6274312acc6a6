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
	CONSTRAINT "ledger_kind_check" CHECK("__new_ledger_entries"."kind" in ('card', 'usdt', 'bonus', 'voucher', 'promotional', 'usage', 'plan')),
	CONSTRAINT "ledger_sign_check" CHECK(("__new_ledger_entries"."kind" = 'usage' and "__new_ledger_entries"."amount_nano" < 0 and "__new_ledger_entries"."generation_id" is not null) or ("__new_ledger_entries"."kind" = 'plan' and "__new_ledger_entries"."amount_nano" < 0) or ("__new_ledger_entries"."kind" not in ('usage', 'plan') and "__new_ledger_entries"."amount_nano" > 0))
);
--> statement-breakpoint
INSERT INTO `__new_ledger_entries`("id", "account_id", "kind", "amount_nano", "reference", "generation_id", "created_at") SELECT "id", "account_id", "kind", "amount_nano", "reference", "generation_id", "created_at" FROM `ledger_entries`;--> statement-breakpoint
DROP TABLE `ledger_entries`;--> statement-breakpoint
ALTER TABLE `__new_ledger_entries` RENAME TO `ledger_entries`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE UNIQUE INDEX `ledger_entries_reference_unique` ON `ledger_entries` (`reference`);--> statement-breakpoint
CREATE INDEX `ledger_account_created_idx` ON `ledger_entries` (`account_id`,`created_at`);