import { t } from "elysia";

export const CreateAccountBody = t.Object({ name: t.String({ minLength: 1, maxLength: 200 }) });

export const CreditBody = t.Object({
  amount: t.Union([t.Number({ exclusiveMinimum: 0 }), t.String({ pattern: "^\\d+(\\.\\d+)?$" })]),
  kind: t.Union([t.Literal("card"), t.Literal("usdt"), t.Literal("bonus"), t.Literal("voucher"), t.Literal("promotional")]),
  reference: t.String({ minLength: 1, maxLength: 200 }),
});

export const CreateKeyBody = t.Object({
  name: t.String({ minLength: 1, maxLength: 200 }),
  limit: t.Optional(t.Union([t.Number({ exclusiveMinimum: 0 }), t.Null()])),
  models: t.Optional(t.Union([t.Array(t.String({ minLength: 1 }), { minItems: 1 }), t.Null()])),
  rate_limit: t.Optional(
    t.Object({
      requests_per_minute: t.Optional(t.Union([t.Integer({ minimum: 1 }), t.Null()])),
      tokens_per_minute: t.Optional(t.Union([t.Integer({ minimum: 1 }), t.Null()])),
    }),
  ),
  expires_at: t.Optional(t.Union([t.String({ format: "date-time" }), t.Null()])),
});

export const RequestsQuery = t.Object({
  limit: t.Optional(t.Numeric({ minimum: 1, maximum: 500 })),
  /** Cursor: ISO time or epoch ms; rows strictly older. */
  before: t.Optional(t.String()),
});
