ALTER TABLE `generations` ADD `cache_write_1h_tokens` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `generations` ADD `cache_discount_nano` integer DEFAULT 0 NOT NULL;