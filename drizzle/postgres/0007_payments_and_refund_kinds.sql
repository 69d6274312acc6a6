CREATE TABLE "payment_events" (
	"id" text PRIMARY KEY NOT NULL,
	"processor" text NOT NULL,
	"type" text NOT NULL,
	"topup_id" text,
	"amount_nano" bigint DEFAULT 0 NOT NULL,
	"received_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "topups" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"method" text NOT NULL,
	"amount_nano" bigint NOT NULL,
	"status" text NOT NULL,
	"processor_ref" text,
	"checkout_url" text,
	"payment_ref" text,
	"network" text,
	"pay_to" text,
	"pay_amount_micro" bigint,
	"flag" text,
	"taken_back_nano" bigint DEFAULT 0 NOT NULL,
	"expires_at" bigint,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL,
	CONSTRAINT "topup_taken_back_check" CHECK ("topups"."taken_back_nano" >= 0 and "topups"."taken_back_nano" <= "topups"."amount_nano")
);
--> statement-breakpoint
CREATE TABLE "unmatched_transfers" (
	"id" text PRIMARY KEY NOT NULL,
	"network" text NOT NULL,
	"token" text NOT NULL,
	"from_address" text NOT NULL,
	"to_address" text NOT NULL,
	"amount_micro" bigint NOT NULL,
	"at" bigint NOT NULL,
	"reason" text NOT NULL,
	"recorded_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "ledger_entries" DROP CONSTRAINT "ledger_kind_check";--> statement-breakpoint
ALTER TABLE "ledger_entries" DROP CONSTRAINT "ledger_sign_check";--> statement-breakpoint
ALTER TABLE "account_plans" ADD COLUMN "subscription_ref" text;--> statement-breakpoint
ALTER TABLE "accounts" ADD COLUMN "blocked_reason" text;--> statement-breakpoint
ALTER TABLE "topups" ADD CONSTRAINT "topups_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "payment_events_received_idx" ON "payment_events" USING btree ("received_at");--> statement-breakpoint
CREATE INDEX "topups_account_created_idx" ON "topups" USING btree ("account_id","created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "topups_payment_ref_idx" ON "topups" USING btree ("payment_ref") WHERE "topups"."payment_ref" is not null;--> statement-breakpoint
CREATE INDEX "topups_network_pay_to_status_idx" ON "topups" USING btree ("network","pay_to","status");--> statement-breakpoint
CREATE INDEX "topups_pending_expires_idx" ON "topups" USING btree ("expires_at") WHERE "topups"."status" = 'pending';--> statement-breakpoint
CREATE INDEX "unmatched_transfers_recorded_idx" ON "unmatched_transfers" USING btree ("recorded_at","id");--> statement-breakpoint
CREATE INDEX "account_plans_subscription_idx" ON "account_plans" USING btree ("subscription_ref") WHERE "account_plans"."subscription_ref" is not null;--> statement-breakpoint
ALTER TABLE "ledger_entries" ADD CONSTRAINT "ledger_kind_check" CHECK ("ledger_entries"."kind" in ('card', 'usdt', 'bonus', 'voucher', 'promotional', 'usage', 'plan', 'refund', 'dispute'));--> statement-breakpoint
ALTER TABLE "ledger_entries" ADD CONSTRAINT "ledger_sign_check" CHECK (("ledger_entries"."kind" = 'usage' and "ledger_entries"."amount_nano" < 0 and "ledger_entries"."generation_id" is not null) or ("ledger_entries"."kind" in ('plan', 'refund', 'dispute') and "ledger_entries"."amount_nano" < 0) or ("ledger_entries"."kind" not in ('usage', 'plan', 'refund', 'dispute') and "ledger_entries"."amount_nano" > 0));