CREATE TABLE `accounts` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`created_at` integer NOT NULL,
	`total_credits_nano` integer DEFAULT 0 NOT NULL,
	`total_debits_nano` integer DEFAULT 0 NOT NULL,
	`paid_credits_nano` integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE `api_keys` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text NOT NULL,
	`key_hash` text NOT NULL,
	`label` text NOT NULL,
	`limit_nano` integer,
	`models` text,
	`rpm` integer,
	`tpm` integer,
	`expires_at` integer,
	`created_at` integer NOT NULL,
	`deleted_at` integer,
	`blocked` integer DEFAULT false NOT NULL,
	`usage_nano` integer DEFAULT 0 NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `api_keys_key_hash_unique` ON `api_keys` (`key_hash`);--> statement-breakpoint
CREATE INDEX `api_keys_account_idx` ON `api_keys` (`account_id`);--> statement-breakpoint
CREATE TABLE `generations` (
	`id` text PRIMARY KEY NOT NULL,
	`response_id` text,
	`account_id` text NOT NULL,
	`key_id` text NOT NULL,
	`model` text NOT NULL,
	`provider` text NOT NULL,
	`ingress` text NOT NULL,
	`stream` integer NOT NULL,
	`status` text NOT NULL,
	`error_code` text,
	`created_at` integer NOT NULL,
	`latency_ms` integer NOT NULL,
	`time_to_first_token_ms` integer,
	`prompt_tokens` integer NOT NULL,
	`completion_tokens` integer NOT NULL,
	`cached_tokens` integer NOT NULL,
	`cache_write_tokens` integer NOT NULL,
	`reasoning_tokens` integer NOT NULL,
	`input_cost_nano` integer NOT NULL,
	`cache_read_cost_nano` integer NOT NULL,
	`cache_write_cost_nano` integer NOT NULL,
	`output_cost_nano` integer NOT NULL,
	`total_cost_nano` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`key_id`) REFERENCES `api_keys`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `generations_account_created_idx` ON `generations` (`account_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `generations_account_response_idx` ON `generations` (`account_id`,`response_id`);--> statement-breakpoint
CREATE TABLE `ledger_entries` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`kind` text NOT NULL,
	`amount_nano` integer NOT NULL,
	`reference` text NOT NULL,
	`generation_id` text,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`generation_id`) REFERENCES `generations`(`id`) ON UPDATE no action ON DELETE no action,
	CONSTRAINT "ledger_kind_check" CHECK("ledger_entries"."kind" in ('card', 'usdt', 'bonus', 'voucher', 'promotional', 'usage')),
	CONSTRAINT "ledger_sign_check" CHECK(("ledger_entries"."kind" = 'usage' and "ledger_entries"."amount_nano" < 0 and "ledger_entries"."generation_id" is not null) or ("ledger_entries"."kind" <> 'usage' and "ledger_entries"."amount_nano" > 0))
);
--> statement-breakpoint
CREATE UNIQUE INDEX `ledger_entries_reference_unique` ON `ledger_entries` (`reference`);--> statement-breakpoint
CREATE INDEX `ledger_account_created_idx` ON `ledger_entries` (`account_id`,`created_at`);--> statement-breakpoint
CREATE TABLE `settings` (
	`name` text PRIMARY KEY NOT NULL,
	`value` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `usage_daily` (
	`account_id` text NOT NULL,
	`key_id` text NOT NULL,
	`day` text NOT NULL,
	`model` text NOT NULL,
	`cost_nano` integer NOT NULL,
	`requests` integer NOT NULL,
	`successful_requests` integer NOT NULL,
	`failed_requests` integer NOT NULL,
	`prompt_tokens` integer NOT NULL,
	`completion_tokens` integer NOT NULL,
	`cached_tokens` integer NOT NULL,
	`cache_write_tokens` integer NOT NULL,
	PRIMARY KEY(`account_id`, `key_id`, `day`, `model`)
);
