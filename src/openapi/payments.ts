import { Type, type TSchema } from "@sinclair/typebox";
import type { DocumentDecoration } from "elysia";
import { buyPlanDocs } from "./admin.ts";
import { adminOperation, clientOperation, component, data, parameter } from "./operation.ts";

/** The docs of top-ups (a client key) and of the operator's payment routes (the admin token). */

const Usd = Type.Number({ description: "USD" });
const Time = Type.String({ format: "date-time" });
const Nullable = (schema: TSchema) => Type.Union([schema, Type.Null()]);
const TAGS = ["cost and usage"];

function page(row: unknown) {
  return Type.Object({
    data: Type.Array(row as TSchema),
    has_more: Type.Boolean(),
    next_before: Nullable(Type.String({ description: "Pass as `before` for the next page; null on the last page" })),
  });
}

const TopupFields = {
  id: Type.String({ description: "tu_…" }),
  method: Type.Union([Type.Literal("card"), Type.Literal("usdt")]),
  amount: Type.Number({ description: "USD credited once paid (whole cents)" }),
  status: Type.Union(["pending", "paid", "credited", "expired", "refunded", "disputed"].map((status) => Type.Literal(status)), {
    description:
      "pending: waiting for the payment; paid: paid but not credited (see flag); credited: on the balance; expired: never paid in time; refunded / disputed: taken back after the credit (taken_back)",
  }),
  created_at: Time,
  updated_at: Time,
  expires_at: Nullable(Type.String({ format: "date-time", description: "A pending top-up expires then; null: the processor's checkout says when" })),
  checkout_url: Type.Optional(Nullable(Type.String({ description: "card: where the payer pays (Stripe Checkout)" }))),
  pay_to: Type.Optional(Nullable(Type.String({ description: "usdt: the receiving address" }))),
  pay_amount: Type.Optional(
    Nullable(Type.String({ description: "usdt: the exact amount to send, 6 decimals; its sub-cent part identifies this top-up, so send exactly this" })),
  ),
  network: Type.Optional(Nullable(Type.String({ description: "usdt: the chain (tron)" }))),
  token: Type.Optional(Type.Literal("USDT")),
  flag: Nullable(Type.String({ description: "Why a payment was not credited automatically (amount or currency differs); null: none" })),
  taken_back: Type.Number({ description: "USD taken back by refunds and disputes" }),
  credited: Type.Boolean({ description: "Whether the amount reached the balance (also true once refunded or disputed)" }),
};

const Topup = component("Topup", Type.Object(TopupFields));

/** A client operation answered with 201 instead of 200. */
function created(operation: DocumentDecoration): DocumentDecoration {
  const responses = { ...(operation.responses as Record<string, unknown>) };
  responses["201"] = { ...(responses["200"] as Record<string, unknown>), description: "Created" };
  delete responses["200"];
  return { ...operation, responses } as DocumentDecoration;
}

export const createTopupDocs = created(
  clientOperation({
    summary: "Top up the account by card (Stripe Checkout) or USDT (TRC-20 on TRON)",
    description:
      "Amounts are USD, whole cents, at most 100000; minimums: 5 by card, 12 by USDT (400 invalid_request naming the minimum). " +
      "card: open checkout_url to pay. usdt: send exactly pay_amount USDT to pay_to on the network before expires_at. " +
      "The top-up is credited once the payment is confirmed; 502/503 when the processor cannot start it (it then stays pending and expires).",
    tags: TAGS,
    request: component(
      "TopupRequest",
      Type.Object({
        method: Type.Union([Type.Literal("card"), Type.Literal("usdt")]),
        amount: Type.Union([Type.Number(), Type.String()], { description: "USD: a number or a decimal string, at most 2 decimals" }),
      }),
    ),
    response: data(Topup),
    errors: [400, 413, 429, 502, 503],
  }),
);

export const getTopupDocs = clientOperation({
  summary: "One top-up of the account",
  tags: TAGS,
  parameters: [parameter("path", "id", "The top-up's id (tu_…)")],
  response: data(Topup),
  errors: [404, 429, 503],
});

export const listTopupsDocs = clientOperation({
  summary: "The account's top-ups, newest first",
  description: "`limit` 1-100 (default 20); `before` the next_before of the previous page (a top-up id), an epoch-ms number or an RFC 3339 time.",
  tags: TAGS,
  parameters: [
    parameter("query", "limit", "1 to 100 (default 20)", { type: "integer", minimum: 1, maximum: 100 }),
    parameter("query", "before", "The next_before of the previous page, an epoch-ms number or an RFC 3339 time"),
  ],
  response: page(Topup),
  errors: [400, 429, 503],
});

// Operators

const AdminTopup = component(
  "AdminTopup",
  Type.Object({
    ...TopupFields,
    account_id: Type.String(),
    processor_ref: Nullable(Type.String({ description: "The processor's object (a Stripe Checkout Session id)" })),
    payment_ref: Nullable(Type.String({ description: "The payment credited (a PaymentIntent id, tron:<transaction id>): the ledger reference" })),
  }),
);

export const listAccountTopupsDocs = adminOperation({
  summary: "An account's top-ups, newest first",
  description: "`limit` 1-100 (default 20); `before` the next_before of the previous page (a top-up id), an epoch-ms number or an RFC 3339 time.",
  response: page(AdminTopup),
  errors: [400, 404],
});

export const listUnmatchedDocs = adminOperation({
  summary: "Transfers to a receiving address that matched no top-up (another token, a wrong amount, after expiry, too small)",
  description:
    "Never credited automatically: credit one by hand (POST /admin/v1/accounts/:id/credits, reference = its id) once the payer is known. " +
    "`limit` 1-100 (default 20); `before` the next_before of the previous page, an epoch-ms number or an RFC 3339 time.",
  response: page(
    component(
      "UnmatchedTransfer",
      Type.Object({
        id: Type.String({ description: "tron:<transaction id>" }),
        network: Type.String(),
        token: Type.String({ description: "The token's contract address" }),
        from: Type.String(),
        to: Type.String(),
        amount: Type.String({ description: "In the token's units, 6 decimals" }),
        at: Time,
        reason: Type.String(),
        recorded_at: Time,
      }),
    ),
  ),
  errors: [400],
});

export const unblockAccountDocs: DocumentDecoration = {
  ...adminOperation({
    summary: "Clear an account's block (set by a payment dispute): its keys work again",
    response: data(Type.Object({ id: Type.String(), blocked: Type.Literal(false), was_blocked: Type.Boolean() })),
    errors: [400, 404],
  }),
  requestBody: { required: false, content: { "application/json": { schema: Type.Object({}, { description: "No fields" }) } } },
} as DocumentDecoration;

export const reconcileDocs = adminOperation({
  summary: "Compare each processor's own payments since a time with our credits",
  description:
    "`since`: an RFC 3339 time or epoch ms (required). Kinds: paid_not_credited (the processor has the money, we did not credit it), " +
    "credited_not_paid (we credited a payment the processor does not list), amount_differs, returned_not_taken_back (refunded or lost disputes not taken back).",
  response: data(
    component(
      "Reconciliation",
      Type.Object({
        since: Time,
        processors: Type.Array(
          Type.Object({
            name: Type.String(),
            records: Type.Integer({ minimum: 0, description: "The processor's payments since `since`" }),
            differences: Type.Array(
              Type.Object({
                payment_ref: Nullable(Type.String()),
                topup_id: Nullable(Type.String()),
                kind: Type.Union(["paid_not_credited", "credited_not_paid", "amount_differs", "returned_not_taken_back"].map((kind) => Type.Literal(kind))),
                processor_amount: Nullable(Usd),
                our_amount: Usd,
              }),
            ),
          }),
        ),
      }),
    ),
  ),
  errors: [400, 502],
});

/** budget's POST /admin/v1/accounts/:id/plan: a balance-funded cycle as before, or with card payments on, a subscription checkout to pay. */
export const buyPlanWithCheckoutDocs = ((): DocumentDecoration => {
  const responses: Record<string, unknown> = { ...(buyPlanDocs.responses as unknown as Record<string, unknown>) };
  const checkout = component(
    "PlanCheckout",
    Type.Object(
      {
        plan: Type.String(),
        funding: Type.Literal("card"),
        status: Type.Literal("pending", { description: "The first cycle starts when the subscription's first invoice is paid" }),
        checkout_url: Type.String({ description: "Where the payer subscribes (Stripe Checkout)" }),
      },
      { description: "funding card with card payments on (STRIPE_SECRET_KEY): the subscription to pay" },
    ),
  );
  responses["201"] = {
    description: "Created: the cycle (balance; card without card payments), or the subscription checkout (card with card payments on)",
    content: { "application/json": { schema: data(Type.Union([Type.Unsafe({ $ref: "#/components/schemas/PlanCycle" }), checkout])) } },
  };
  responses["502"] = {
    description: "The card processor could not make the subscription checkout",
    content: { "application/json": { schema: Type.Unsafe({ $ref: "#/components/schemas/Error" }) } },
  };
  return { ...buyPlanDocs, responses } as unknown as DocumentDecoration;
})();
