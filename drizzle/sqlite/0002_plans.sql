CREATE TABLE `account_plans` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`plan` text NOT NULL,
	`funding` text NOT NULL,
	`price_nano` integer NOT NULL,
	`started_at` integer NOT NULL,
	`ends_at` integer NOT NULL,
	`renewing` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `account_plans_account_idx` ON `account_plans` (`account_id`,`ends_at`);--> statement-breakpoint
CREATE TABLE `spend_buckets` (
	`account_id` text NOT NULL,
	`bucket_start` integer NOT NULL,
	`cost_nano` integer NOT NULL,
	PRIMARY KEY(`account_id`, `bucket_start`)
);
