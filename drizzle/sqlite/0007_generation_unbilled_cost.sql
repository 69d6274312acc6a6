ALTER TABLE `generations` ADD `unbilled_cost_nano` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `generations` ADD `usage_estimated` integer DEFAULT false NOT NULL;