import { Type, type TSchema } from "@sinclair/typebox";
import { PlanSchema } from "../plugins/budget/plans.ts";
import { adminOperation, component, data } from "./operation.ts";
import { Attempts } from "./account.ts";

/** The operator API's docs (/admin/v1, the admin token). Request bodies and ids come from the routes' own Elysia schemas. */

const Usd = Type.Number({ description: "USD" });
const Time = Type.String({ format: "date-time" });
const Nullable = (schema: TSchema) => Type.Union([schema, Type.Null()]);
const Count = Type.Integer({ minimum: 0 });

const AdminKey = Type.Object({
  id: Type.String(),
  account_id: Type.String(),
  name: Type.String(),
  label: Type.String({ description: "The key, masked" }),
  limit: Nullable(Usd),
  models: Nullable(Type.Array(Type.String())),
  rate_limit: Type.Object({ requests_per_minute: Nullable(Count), tokens_per_minute: Nullable(Count) }),
  expires_at: Nullable(Time),
  created_at: Nullable(Time),
});

const AccountRow = component("AdminAccountRow", Type.Object({ id: Type.String(), name: Type.String(), created_at: Time }));

/** A page of a list: `has_more`, and the `before` of the next page. */
function page(row: TSchema) {
  return Type.Object({
    data: Type.Array(row),
    has_more: Type.Boolean(),
    next_before: Nullable(Type.String({ description: "Pass as `before` for the next page; null on the last page" })),
  });
}

export const listAccountsDocs = adminOperation({
  summary: "Accounts, newest first; q searches names and ids",
  description: "`limit` 1-100 (default 20); `before` the next_before of the previous page, an epoch-ms number or an RFC 3339 time. Unknown or repeated query names are a 400.",
  response: page(AccountRow),
  errors: [400],
});

export const createAccountDocs = adminOperation({
  summary: "Create an account",
  status: 201,
  response: data(AccountRow),
  errors: [400],
});

export const getAccountDocs = adminOperation({
  summary: "An account and its balance",
  response: data(
    component(
      "AdminAccount",
      Type.Object({
        id: Type.String(),
        name: Type.String(),
        created_at: Time,
        total_credits: Usd,
        total_usage: Usd,
        balance: Usd,
        currency: Type.Literal("USD"),
      }),
    ),
  ),
  errors: [400, 404],
});

export const creditAccountDocs = adminOperation({
  summary: "Credit an account (idempotent on reference)",
  description: "The same reference again answers the first credit with duplicate: true; a reference used for another kind is a 409.",
  status: 201,
  response: data(component("AdminCredit", Type.Object({ entry_id: Type.String(), balance: Usd, duplicate: Type.Boolean() }))),
  errors: [400, 404, 409],
});

export const createKeyDocs = adminOperation({
  summary: "Create an API key (the full key is shown only in this answer)",
  status: 201,
  response: data(component("AdminKeyCreated", Type.Composite([AdminKey, Type.Object({ key: Type.String({ description: "The full key (sk-gw-…), shown once" }) })]))),
  errors: [400, 404],
});

export const listKeysDocs = adminOperation({
  summary: "An account's API keys, newest first, revoked ones included (labels only, never a key)",
  description: "`limit` 1-100 (default 20); `before` the next_before of the previous page (a key id), an epoch-ms number or an RFC 3339 time.",
  response: page(
    component(
      "AdminKeyRow",
      Type.Composite([AdminKey, Type.Object({ deleted_at: Nullable(Time), blocked: Type.Boolean() })], { description: "A key as listed: its masked label, never the key" }),
    ),
  ),
  errors: [400, 404],
});

export const deleteKeyDocs = adminOperation({
  summary: "Delete (revoke) an API key at once",
  response: data(Type.Object({ id: Type.String(), deleted: Type.Literal(true) })),
  errors: [400, 404],
});

export const listRequestsDocs = adminOperation({
  summary: "Per-request log, newest first",
  description: "`limit` 1-500 (default 50); `before` a next_before cursor, an epoch-ms number or an RFC 3339 time.",
  response: Type.Object({
    data: Type.Array(
      component(
        "AdminRequest",
        Type.Object({
          id: Type.String(),
          created_at: Time,
          key_id: Type.String(),
          model: Type.String({ description: "The model that answered (and is billed)" }),
          requested_model: Type.String({ description: "The model the client asked for; equal to `model` unless the request fell back to another" }),
          status: Type.String({ description: "success, failed or cancelled" }),
          error_code: Nullable(Type.String()),
          prompt_tokens: Count,
          completion_tokens: Count,
          cached_tokens: Count,
          cache_write_tokens: Count,
          reasoning_tokens: Count,
          cost: Usd,
          latency_ms: Count,
          deployment: Nullable(Type.String({ description: "The deployment that answered (the one billed); null when none did" })),
          attempts: Attempts,
        }),
      ),
    ),
    next_before: Nullable(Type.String({ description: "Pass as `before` for the next page; null on the last page" })),
  }),
  errors: [400, 404],
});

// The budget plugin's routes under /admin (plans and funds).

export const listPlansDocs = adminOperation({
  summary: "Configured plans",
  response: data(Type.Record(Type.String(), component("Plan", PlanSchema), { description: "By plan name" })),
  errors: [],
});

export const buyPlanDocs = adminOperation({
  summary: "Buy a plan cycle: balance (one non-renewing 30-day cycle per account) or card (recurring)",
  status: 201,
  response: data(
    component(
      "PlanCycle",
      Type.Object({
        id: Type.String(),
        account_id: Type.String(),
        plan: Type.String(),
        funding: Type.Union([Type.Literal("balance"), Type.Literal("card")]),
        price: Usd,
        started_at: Time,
        ends_at: Time,
        renewing: Type.Boolean(),
        balance: Usd,
      }),
    ),
  ),
  errors: [400, 404, 409],
});

export const fundsDocs = adminOperation({
  summary: "What a request may hold now: the balance, the key's room and the plan windows, each less every live hold",
  response: data(
    component(
      "Funds",
      Type.Object({
        account_id: Type.String(),
        balance: Usd,
        available: Usd,
        held: Usd,
        key: Nullable(Type.Object({ id: Type.String(), limit: Nullable(Usd), usage: Usd, available: Nullable(Usd), held: Nullable(Usd) })),
        windows: Type.Record(Type.String(), Type.Object({ cap: Usd, start: Time, spent_or_held: Usd }), { description: "By plan window name" }),
      }),
    ),
  ),
  errors: [400, 404],
});

// Dashboard users of an account.

const AdminUser = component(
  "AdminUser",
  Type.Object(
    {
      id: Type.String(),
      email: Type.String({ description: "Lower-cased; unique over the whole gateway" }),
      role: Type.Union([Type.Literal("owner"), Type.Literal("member")]),
      account_id: Type.String(),
      created_at: Time,
    },
    { description: "A person who signs in to the dashboard; never the password or its hash" },
  ),
);

export const createUserDocs = adminOperation({
  summary: "Create a dashboard user of the account (email and password)",
  description:
    "`email` is trimmed and lower-cased, and unique over the whole gateway (409 `conflict` when taken, in any case). `password`: 10 to 256 characters, kept as an argon2id hash only. `role`: owner (default) or member.",
  status: 201,
  response: data(AdminUser),
  errors: [400, 404, 409],
});

export const listUsersDocs = adminOperation({
  summary: "An account's dashboard users, oldest first",
  response: data(Type.Array(AdminUser)),
  errors: [400, 404],
});
