CREATE TABLE `gateway_instances` (
	`id` text PRIMARY KEY NOT NULL,
	`heartbeat_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `reservations` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`key_id` text NOT NULL,
	`amount_nano` integer NOT NULL,
	`instance_id` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `reservations_account_idx` ON `reservations` (`account_id`);--> statement-breakpoint
CREATE INDEX `reservations_key_idx` ON `reservations` (`key_id`);--> statement-breakpoint
CREATE INDEX `reservations_instance_idx` ON `reservations` (`instance_id`);