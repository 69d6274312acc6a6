ALTER TABLE "generations" ADD COLUMN "cache_write_1h_tokens" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "generations" ADD COLUMN "cache_discount_nano" bigint DEFAULT 0 NOT NULL;