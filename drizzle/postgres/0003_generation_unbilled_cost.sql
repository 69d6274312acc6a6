ALTER TABLE "generations" ADD COLUMN "unbilled_cost_nano" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "generations" ADD COLUMN "usage_estimated" boolean DEFAULT false NOT NULL;