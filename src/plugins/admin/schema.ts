import { t } from "elysia";

export const CreateAccountBody = t.Object({ name: t.String({ minLength: 1, maxLength: 200 }) });

export const CreditBody = t.Object({
  amount: t.Union([t.Number({ exclusiveMinimum: 0 }), t.String({ pattern: "^\\d+(\\.\\d+)?$" })]),
  kind: t.Union([t.Literal("card"), t.Literal("usdt"), t.Literal("bonus"), t.Literal("voucher"), t.Literal("promotional")], {
    error: "kind must be one of card, usdt, bonus, voucher, promotional",
  }),
  reference: t.String({ minLength: 1, maxLength: 200 }),
});

export const CreateKeyBody = t.Object({
  name: t.String({ minLength: 1, maxLength: 200 }),
  limit: t.Optional(t.Union([t.Number({ exclusiveMinimum: 0 }), t.Null()])),
  models: t.Optional(t.Union([t.Array(t.String({ minLength: 1 }), { minItems: 1 }), t.Null()])),
  rate_limit: t.Optional(
    // Elysia's normalizer turns a non-object (5, "x", null) into {} when every property is optional;
    // minProperties makes that {} fail validation instead of silently passing.
    t.Object(
      {
        requests_per_minute: t.Optional(t.Union([t.Integer({ minimum: 1 }), t.Null()])),
        tokens_per_minute: t.Optional(t.Union([t.Integer({ minimum: 1 }), t.Null()])),
      },
      { minProperties: 1 },
    ),
  ),
  expires_at: t.Optional(t.Union([t.String({ format: "date-time" }), t.Null()])),
});

export const RequestsQuery = t.Object({
  /** 1..500, default 50; parsed by the handler so an error names the field (Numeric range errors lose the path). */
  limit: t.Optional(t.String()),
  /** Cursor: ISO time or epoch ms; rows strictly older. */
  before: t.Optional(t.String()),
});
