CREATE TABLE "account_plans" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"plan" text NOT NULL,
	"funding" text NOT NULL,
	"price_nano" bigint NOT NULL,
	"started_at" bigint NOT NULL,
	"ends_at" bigint NOT NULL,
	"renewing" boolean NOT NULL
);
--> statement-breakpoint
CREATE TABLE "accounts" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"created_at" bigint NOT NULL,
	"total_credits_nano" bigint DEFAULT 0 NOT NULL,
	"total_debits_nano" bigint DEFAULT 0 NOT NULL,
	"paid_credits_nano" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "api_keys" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"name" text NOT NULL,
	"key_hash" text NOT NULL,
	"label" text NOT NULL,
	"limit_nano" bigint,
	"models" text,
	"rpm" integer,
	"tpm" integer,
	"expires_at" bigint,
	"created_at" bigint NOT NULL,
	"deleted_at" bigint,
	"blocked" boolean DEFAULT false NOT NULL,
	"usage_nano" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "api_keys_key_hash_unique" UNIQUE("key_hash")
);
--> statement-breakpoint
CREATE TABLE "gateway_instances" (
	"id" text PRIMARY KEY NOT NULL,
	"heartbeat_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "generations" (
	"id" text PRIMARY KEY NOT NULL,
	"response_id" text,
	"account_id" text NOT NULL,
	"key_id" text NOT NULL,
	"model" text NOT NULL,
	"provider" text NOT NULL,
	"ingress" text NOT NULL,
	"stream" boolean NOT NULL,
	"status" text NOT NULL,
	"error_code" text,
	"created_at" bigint NOT NULL,
	"latency_ms" integer NOT NULL,
	"time_to_first_token_ms" integer,
	"prompt_tokens" integer NOT NULL,
	"completion_tokens" integer NOT NULL,
	"cached_tokens" integer NOT NULL,
	"cache_write_tokens" integer NOT NULL,
	"reasoning_tokens" integer NOT NULL,
	"input_cost_nano" bigint NOT NULL,
	"cache_read_cost_nano" bigint NOT NULL,
	"cache_write_cost_nano" bigint NOT NULL,
	"output_cost_nano" bigint NOT NULL,
	"total_cost_nano" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "ledger_entries" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"kind" text NOT NULL,
	"amount_nano" bigint NOT NULL,
	"reference" text NOT NULL,
	"generation_id" text,
	"created_at" bigint NOT NULL,
	CONSTRAINT "ledger_entries_reference_unique" UNIQUE("reference"),
	CONSTRAINT "ledger_kind_check" CHECK ("ledger_entries"."kind" in ('card', 'usdt', 'bonus', 'voucher', 'promotional', 'usage', 'plan')),
	CONSTRAINT "ledger_sign_check" CHECK (("ledger_entries"."kind" = 'usage' and "ledger_entries"."amount_nano" < 0 and "ledger_entries"."generation_id" is not null) or ("ledger_entries"."kind" = 'plan' and "ledger_entries"."amount_nano" < 0) or ("ledger_entries"."kind" not in ('usage', 'plan') and "ledger_entries"."amount_nano" > 0))
);
--> statement-breakpoint
CREATE TABLE "reservations" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"key_id" text NOT NULL,
	"amount_nano" bigint NOT NULL,
	"instance_id" text NOT NULL,
	"created_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "settings" (
	"name" text PRIMARY KEY NOT NULL,
	"value" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "spend_buckets" (
	"account_id" text NOT NULL,
	"bucket_start" bigint NOT NULL,
	"cost_nano" bigint NOT NULL,
	CONSTRAINT "spend_buckets_account_id_bucket_start_pk" PRIMARY KEY("account_id","bucket_start")
);
--> statement-breakpoint
CREATE TABLE "usage_daily" (
	"account_id" text NOT NULL,
	"key_id" text NOT NULL,
	"day" text NOT NULL,
	"model" text NOT NULL,
	"cost_nano" bigint NOT NULL,
	"requests" bigint NOT NULL,
	"successful_requests" bigint NOT NULL,
	"failed_requests" bigint NOT NULL,
	"prompt_tokens" bigint NOT NULL,
	"completion_tokens" bigint NOT NULL,
	"cached_tokens" bigint NOT NULL,
	"cache_write_tokens" bigint NOT NULL,
	CONSTRAINT "usage_daily_account_id_key_id_day_model_pk" PRIMARY KEY("account_id","key_id","day","model")
);
--> statement-breakpoint
ALTER TABLE "account_plans" ADD CONSTRAINT "account_plans_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "generations" ADD CONSTRAINT "generations_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "generations" ADD CONSTRAINT "generations_key_id_api_keys_id_fk" FOREIGN KEY ("key_id") REFERENCES "public"."api_keys"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ledger_entries" ADD CONSTRAINT "ledger_entries_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ledger_entries" ADD CONSTRAINT "ledger_entries_generation_id_generations_id_fk" FOREIGN KEY ("generation_id") REFERENCES "public"."generations"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "account_plans_account_idx" ON "account_plans" USING btree ("account_id","ends_at");--> statement-breakpoint
CREATE INDEX "api_keys_account_idx" ON "api_keys" USING btree ("account_id");--> statement-breakpoint
CREATE INDEX "generations_account_created_idx" ON "generations" USING btree ("account_id","created_at");--> statement-breakpoint
CREATE INDEX "generations_account_response_idx" ON "generations" USING btree ("account_id","response_id");--> statement-breakpoint
CREATE INDEX "ledger_account_created_idx" ON "ledger_entries" USING btree ("account_id","created_at");--> statement-breakpoint
CREATE INDEX "reservations_account_idx" ON "reservations" USING btree ("account_id");--> statement-breakpoint
CREATE INDEX "reservations_key_idx" ON "reservations" USING btree ("key_id");--> statement-breakpoint
CREATE INDEX "reservations_instance_idx" ON "reservations" USING btree ("instance_id");