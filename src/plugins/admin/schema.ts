import { t } from "elysia";

/** The most one credit or one key limit may be: whole nano-USD figures (and sums of many) stay safe integers. */
export const MAX_AMOUNT_USD = 1_000_000;

/** Rate limits are positive integers that fit both stores' 32-bit integer columns. */
export const MAX_RATE_LIMIT = 1_000_000_000;

/**
 * Text a store keeps as given: no control characters (Postgres refuses NUL in text; SQLite would keep
 * it and the two stores would disagree) and no unpaired UTF-16 surrogate (it has no UTF-8 form and
 * would be stored as U+FFFD). Code-unit ranges, so it reads the same with or without the `u` flag.
 */
export const PRINTABLE = "^(?:[^\\u0000-\\u001f\\u007f\\ud800-\\udfff]|[\\ud800-\\udbff][\\udc00-\\udfff])*$";

function text(field: string, maxLength: number) {
  return t.String({
    minLength: 1,
    maxLength,
    pattern: PRINTABLE,
    error: `${field} must be 1 to ${maxLength} characters, without control characters (NUL included) or unpaired surrogates`,
  });
}

/** An `:id` path segment: the shape of every id the stores make (acct_…, key_…), so nothing else reaches a query. */
export const ID_PATTERN = "^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$";
export const ID_ERROR = "id must be 1 to 200 letters, digits, _ . : or - (e.g. acct_0123…)";
export const IdParams = t.Object({ id: t.String({ pattern: ID_PATTERN, error: ID_ERROR }) });

export const CreateAccountBody = t.Object({ name: text("name", 200) });

export const CreditBody = t.Object({
  amount: t.Union([t.Number({ exclusiveMinimum: 0 }), t.String({ pattern: "^\\d+(\\.\\d+)?$", maxLength: 40 })], {
    error: `amount must be a positive USD amount (a number or a decimal string) of at most ${MAX_AMOUNT_USD} with at most 9 decimals`,
  }),
  kind: t.Union([t.Literal("card"), t.Literal("usdt"), t.Literal("bonus"), t.Literal("voucher"), t.Literal("promotional")], {
    error: "kind must be one of card, usdt, bonus, voucher, promotional",
  }),
  reference: text("reference", 200),
});

const rateLimit = (field: string) =>
  t.Optional(
    t.Union([t.Integer({ minimum: 1, maximum: MAX_RATE_LIMIT }), t.Null()], {
      error: `${field} must be an integer from 1 to ${MAX_RATE_LIMIT}, or null`,
    }),
  );

export const CreateKeyBody = t.Object({
  name: text("name", 200),
  limit: t.Optional(
    t.Union([t.Number({ exclusiveMinimum: 0 }), t.Null()], {
      error: `limit must be a positive USD amount of at most ${MAX_AMOUNT_USD} with at most 9 decimals, or null`,
    }),
  ),
  models: t.Optional(
    t.Union([t.Array(text("each model id", 200), { minItems: 1, maxItems: 1000 }), t.Null()], {
      error: "models must be a non-empty array of catalog model ids, or null",
    }),
  ),
  rate_limit: t.Optional(
    // Elysia's normalizer turns a non-object (5, "x", null) into {} when every property is optional;
    // minProperties makes that {} fail validation instead of silently passing.
    t.Object(
      {
        requests_per_minute: rateLimit("requests_per_minute"),
        tokens_per_minute: rateLimit("tokens_per_minute"),
      },
      { minProperties: 1 },
    ),
  ),
  /** Parsed by the handler (strict calendar check); Elysia's date-time format takes 2030-02-30 and worse. */
  expires_at: t.Optional(t.Union([t.String({ maxLength: 64 }), t.Null()], { error: "expires_at must be a time string or null" })),
});

export const RequestsQuery = t.Object({
  /** 1..500, default 50; parsed by the handler so an error names the field (Numeric range errors lose the path). */
  limit: t.Optional(t.String()),
  /** Cursor: ISO time or epoch ms; rows strictly older. */
  before: t.Optional(t.String()),
});

/** Parsed strictly by the handler from the URL (list-query.ts): only these names, each once. */
export const AccountsQuery = t.Object({
  /** 1..100, default 20. */
  limit: t.Optional(t.String()),
  /** The `next_before` of the previous page (an account id), an epoch-ms number or an RFC 3339 time. */
  before: t.Optional(t.String()),
  /** A substring of the name or the id; A-Z case-insensitive. */
  q: t.Optional(t.String()),
});

export const KeysQuery = t.Object({
  /** 1..100, default 20. */
  limit: t.Optional(t.String()),
  /** The `next_before` of the previous page (a key id of the account), an epoch-ms number or an RFC 3339 time. */
  before: t.Optional(t.String()),
});

/**
 * A dashboard user. email and password are strings here; their rules (an email's shape, 10 to 256
 * characters of password) are checked by the handler with auth/users.ts, the same rules as the dashboard's
 * sign-up, so the message says the rule and never echoes the password.
 */
export const CreateUserBody = t.Object({
  email: t.String({ error: "email must be a string" }),
  password: t.String({ error: "password must be a string" }),
  role: t.Optional(t.Union([t.Literal("owner"), t.Literal("member")], { error: "role must be one of owner, member" })),
});
