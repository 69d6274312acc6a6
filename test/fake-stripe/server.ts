/**
 * A fake Stripe API for tests (real HTTP via Bun.serve), speaking Stripe's wire format: form-encoded request bodies
 * with bracketed keys (`line_items[0][price_data][unit_amount]=500`), JSON answers of Stripe's objects, errors as
 * `{error: {type, message, param?}}`, `Authorization: Bearer <secret key>` (401 otherwise), `Idempotency-Key`
 * honoured, lists as `{object: "list", data, has_more, url}` paged by `starting_after`, filtered by `created[gte]`.
 *
 *   const fake = await startFakeStripe();                  // STRIPE_API_BASE = fake.url, STRIPE_SECRET_KEY = fake.secretKey
 *   const session = fake.completeSession(id);              // the payer paid: a PaymentIntent pi_… and a charge ch_…
 *   fake.refund(session.payment_intent, 500);              // a refund re_… of 5 USD; fake.charge(id) shows it
 *
 * Served: POST /v1/checkout/sessions, GET /v1/checkout/sessions[/:id], GET /v1/payment_intents/:id,
 * GET /v1/charges/:id, GET /v1/refunds, GET /v1/disputes. What the events carry comes from events.ts.
 */

type Json = Record<string, any>;

export const FAKE_STRIPE_SECRET_KEY = "sk_test_fake_stripe_0123456789";

export interface RecordedStripeRequest {
  method: string;
  /** Path and query as sent, e.g. "/v1/checkout/sessions?created[gte]=1". */
  path: string;
  headers: Record<string, string>;
  /** The form body parsed into Stripe's nested parameters (strings, arrays for [0], [1], …). */
  params: Json;
  /** The form body as sent. */
  raw: string;
}

export interface FakeStripe {
  url: string;
  secretKey: string;
  /** Every API request, in order. */
  requests: RecordedStripeRequest[];
  /** While true every request answers 500 api_error with Stripe-Should-Retry: false (Stripe unreachable for the client). */
  outage: boolean;
  /** The current Checkout Session (a copy). */
  session(id: string): Json;
  sessions(): Json[];
  /** The line items the session was created with (Stripe does not include them in the session object). */
  lineItems(id: string): Json[];
  /** The payer paid: a payment session gets a PaymentIntent and a charge; a subscription session a subscription. Overrides what Stripe reports as paid. */
  completeSession(id: string, paid?: { amountTotal?: number; currency?: string; paymentStatus?: "paid" | "unpaid" }): Json;
  /** The session ended unpaid. */
  expireSession(id: string): Json;
  paymentIntent(id: string): Json;
  charge(id: string): Json;
  /** A refund of `cents` of the payment; returns the refund and the charge after it (with its refunds listed newest first). */
  refund(paymentIntent: string, cents: number): { refund: Json; charge: Json };
  /** A dispute of the payment (its whole amount unless said). */
  dispute(paymentIntent: string, cents?: number): Json;
  subscription(id: string): Json;
  /** A paid invoice of the subscription (its price), as Stripe issues one each period. */
  invoice(subscriptionId: string): Json;
  /** The subscription ends (canceled); returns it. */
  cancelSubscription(id: string): Json;
  stop(): Promise<void>;
}

/** Parses `a[b][0][c]=v&…` into `{a: {b: [{c: "v"}]}}`, as Stripe reads its form bodies. */
export function parseStripeForm(body: string): Json {
  const root: Json = {};
  for (const [key, value] of new URLSearchParams(body)) {
    const path = key.replace(/\]/g, "").split("[");
    let node: any = root;
    path.forEach((segment, index) => {
      const last = index === path.length - 1;
      const slot: string | number = Array.isArray(node) ? Number(segment) : segment;
      if (last) {
        node[slot] = value;
        return;
      }
      if (node[slot] === undefined) node[slot] = /^\d+$/.test(path[index + 1]!) ? [] : {};
      node = node[slot];
    });
  }
  return root;
}

function stripeError(status: number, type: string, message: string, param?: string, headers: Record<string, string> = {}): Response {
  return Response.json({ error: { type, message, ...(param ? { param } : {}), request_log_url: null } }, { status, headers: { "request-id": `req_fake${Date.now()}`, ...headers } });
}

let counter = 0;
const RUN = Math.random().toString(36).slice(2, 8);
const newId = (prefix: string) => `${prefix}_test_${RUN}${(++counter).toString(36).padStart(8, "0")}`;
const nowSeconds = () => Math.floor(Date.now() / 1000);

export async function startFakeStripe(options: { secretKey?: string; port?: number } = {}): Promise<FakeStripe> {
  const secretKey = options.secretKey ?? FAKE_STRIPE_SECRET_KEY;
  const requests: RecordedStripeRequest[] = [];
  const sessions = new Map<string, Json>();
  const lineItems = new Map<string, Json[]>();
  const sessionExtras = new Map<string, { paymentIntentMetadata: Json; subscriptionMetadata: Json }>();
  const paymentIntents = new Map<string, Json>();
  const charges = new Map<string, Json>();
  const refunds = new Map<string, Json>();
  const disputes = new Map<string, Json>();
  const subscriptions = new Map<string, Json>();
  const invoices = new Map<string, Json>();
  const idempotent = new Map<string, { raw: string; path: string; status: number; body: Json }>();

  function must<T>(map: Map<string, T>, id: string, what: string): T {
    const found = map.get(id);
    if (!found) throw new Error(`fake stripe: no ${what} ${id}`);
    return found;
  }

  function createSession(params: Json): Response {
    const mode = params.mode;
    if (mode !== "payment" && mode !== "subscription" && mode !== "setup") return stripeError(400, "invalid_request_error", "Missing required param: mode.", "mode");
    const items: Json[] = Array.isArray(params.line_items) ? params.line_items : [];
    if (mode !== "setup" && items.length === 0) return stripeError(400, "invalid_request_error", "You must provide at least one line item.", "line_items");
    let total = 0;
    let currency: string | null = null;
    for (const [index, item] of items.entries()) {
      const unit = Number(item?.price_data?.unit_amount);
      if (!Number.isSafeInteger(unit) || unit < 0) return stripeError(400, "invalid_request_error", "Invalid integer: unit_amount", `line_items[${index}][price_data][unit_amount]`);
      if (!item?.price_data?.currency) return stripeError(400, "invalid_request_error", "Missing required param: line_items[0][price_data][currency].", `line_items[${index}][price_data][currency]`);
      if (mode === "subscription" && !item.price_data.recurring?.interval) {
        return stripeError(400, "invalid_request_error", "You must specify `recurring` on price_data in `subscription` mode.", `line_items[${index}][price_data][recurring]`);
      }
      total += unit * Number(item.quantity ?? 1);
      currency = String(item.price_data.currency).toLowerCase();
    }
    if (mode === "payment" && total < 50) return stripeError(400, "invalid_request_error", "The Checkout Session's total amount due must add up to at least $0.50 usd", "line_items");
    const id = newId("cs");
    const created = nowSeconds();
    const session: Json = {
      id,
      object: "checkout.session",
      amount_subtotal: total,
      amount_total: total,
      cancel_url: params.cancel_url ?? null,
      client_reference_id: params.client_reference_id ?? null,
      created,
      currency,
      customer: null,
      expires_at: created + 24 * 3600,
      invoice: null,
      livemode: false,
      metadata: params.metadata ?? {},
      mode,
      payment_intent: null,
      payment_status: "unpaid",
      status: "open",
      subscription: null,
      success_url: params.success_url ?? null,
      url: `https://checkout.stripe.com/c/pay/${id}#fake`,
    };
    sessions.set(id, session);
    lineItems.set(id, items);
    sessionExtras.set(id, { paymentIntentMetadata: params.payment_intent_data?.metadata ?? {}, subscriptionMetadata: params.subscription_data?.metadata ?? {} });
    return Response.json(session);
  }

  /** Stripe's list: newest first, `created[gte]` / `[lte]`, `starting_after`, `limit` (default 10, at most 100). */
  function list(path: string, query: URLSearchParams, items: Json[]): Response {
    const gte = query.get("created[gte]");
    const lte = query.get("created[lte]");
    let all = items.filter((item) => (gte === null || item.created >= Number(gte)) && (lte === null || item.created <= Number(lte)));
    all = all.sort((a, b) => b.created - a.created || (a.id < b.id ? 1 : -1));
    const after = query.get("starting_after");
    if (after !== null) {
      const index = all.findIndex((item) => item.id === after);
      all = index === -1 ? [] : all.slice(index + 1);
    }
    const limit = Math.min(100, Math.max(1, Number(query.get("limit") ?? 10)));
    return Response.json({ object: "list", data: all.slice(0, limit), has_more: all.length > limit, url: path });
  }

  function refundList(charge: Json): Json {
    const data = [...refunds.values()].filter((refund) => refund.charge === charge.id).sort((a, b) => b.created - a.created || (a.id < b.id ? 1 : -1));
    return { object: "list", data, has_more: false, total_count: data.length, url: `/v1/charges/${charge.id}/refunds` };
  }

  function route(method: string, url: URL, params: Json): Response {
    const path = url.pathname;
    const query = url.searchParams;
    let match: RegExpExecArray | null;
    if (method === "POST" && path === "/v1/checkout/sessions") return createSession(params);
    if (method === "GET" && path === "/v1/checkout/sessions") {
      const filtered = [...sessions.values()].filter((session) => (query.get("payment_intent") ? session.payment_intent === query.get("payment_intent") : true));
      return list(path, query, filtered);
    }
    if (method === "GET" && (match = /^\/v1\/checkout\/sessions\/([^/]+)$/.exec(path))) {
      const session = sessions.get(match[1]!);
      return session ? Response.json(session) : stripeError(404, "invalid_request_error", `No such checkout.session: '${match[1]}'`, "session");
    }
    if (method === "GET" && (match = /^\/v1\/payment_intents\/([^/]+)$/.exec(path))) {
      const intent = paymentIntents.get(match[1]!);
      return intent ? Response.json(intent) : stripeError(404, "invalid_request_error", `No such payment_intent: '${match[1]}'`, "intent");
    }
    if (method === "GET" && (match = /^\/v1\/charges\/([^/]+)$/.exec(path))) {
      const charge = charges.get(match[1]!);
      return charge ? Response.json({ ...charge, refunds: undefined }) : stripeError(404, "invalid_request_error", `No such charge: '${match[1]}'`, "id");
    }
    if (method === "GET" && path === "/v1/refunds") {
      const charge = query.get("charge");
      const intent = query.get("payment_intent");
      return list(path, query, [...refunds.values()].filter((refund) => (charge === null || refund.charge === charge) && (intent === null || refund.payment_intent === intent)));
    }
    if (method === "GET" && path === "/v1/disputes") return list(path, query, [...disputes.values()]);
    return stripeError(404, "invalid_request_error", `Unrecognized request URL (${method}: ${path}). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.`);
  }

  const server = Bun.serve({
    port: options.port ?? 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      const url = new URL(request.url);
      const raw = request.method === "GET" ? "" : await request.text();
      const params = parseStripeForm(raw);
      const headers = Object.fromEntries([...request.headers].map(([name, value]) => [name.toLowerCase(), value]));
      requests.push({ method: request.method, path: url.pathname + url.search, headers, params, raw });
      if (fake.outage) return stripeError(500, "api_error", "An unknown error occurred", undefined, { "stripe-should-retry": "false" });
      const auth = request.headers.get("authorization") ?? "";
      if (auth !== `Bearer ${secretKey}`) {
        const given = auth.replace(/^Bearer /, "");
        return stripeError(401, "invalid_request_error", given ? `Invalid API Key provided: ${given.slice(0, 8)}${"*".repeat(Math.max(0, given.length - 12))}${given.slice(-4)}` : "You did not provide an API key.");
      }
      const key = request.headers.get("idempotency-key");
      if (key !== null && request.method === "POST") {
        const seen = idempotent.get(key);
        if (seen) {
          if (seen.raw !== raw || seen.path !== url.pathname) {
            return stripeError(400, "idempotency_error", `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`);
          }
          return Response.json(seen.body, { status: seen.status, headers: { "idempotent-replayed": "true" } });
        }
      }
      const response = route(request.method, url, params);
      if (key !== null && request.method === "POST") idempotent.set(key, { raw, path: url.pathname, status: response.status, body: (await response.clone().json()) as Json });
      return response;
    },
  });

  const fake: FakeStripe = {
    url: `http://127.0.0.1:${server.port}`,
    secretKey,
    requests,
    outage: false,
    session: (id) => structuredClone(must(sessions, id, "checkout.session")),
    sessions: () => [...sessions.values()].map((session) => structuredClone(session)),
    lineItems: (id) => structuredClone(must(lineItems, id, "checkout.session")),
    completeSession(id, paid = {}) {
      const session = must(sessions, id, "checkout.session");
      const extras = sessionExtras.get(id)!;
      session.status = "complete";
      session.payment_status = paid.paymentStatus ?? "paid";
      if (paid.amountTotal !== undefined) session.amount_total = paid.amountTotal;
      if (paid.currency !== undefined) session.currency = paid.currency;
      const created = nowSeconds();
      if (session.mode === "payment" && session.payment_status === "paid") {
        const intentId = newId("pi");
        const chargeId = newId("ch");
        const amount = session.amount_total;
        paymentIntents.set(intentId, {
          id: intentId,
          object: "payment_intent",
          amount,
          amount_received: amount,
          created,
          currency: session.currency,
          latest_charge: chargeId,
          metadata: structuredClone(extras.paymentIntentMetadata),
          status: "succeeded",
        });
        charges.set(chargeId, {
          id: chargeId,
          object: "charge",
          amount,
          amount_captured: amount,
          amount_refunded: 0,
          captured: true,
          created,
          currency: session.currency,
          disputed: false,
          metadata: {},
          paid: true,
          payment_intent: intentId,
          refunded: false,
          status: "succeeded",
        });
        session.payment_intent = intentId;
      }
      if (session.mode === "subscription") {
        const subscriptionId = newId("sub");
        const item = lineItems.get(id)![0]!;
        subscriptions.set(subscriptionId, {
          id: subscriptionId,
          object: "subscription",
          created,
          currency: session.currency,
          customer: newId("cus"),
          metadata: structuredClone(extras.subscriptionMetadata),
          status: "active",
          cancel_at_period_end: false,
          items: {
            object: "list",
            data: [{ id: newId("si"), object: "subscription_item", quantity: 1, price: { object: "price", currency: session.currency, unit_amount: Number(item.price_data.unit_amount), recurring: { interval: item.price_data.recurring.interval, interval_count: Number(item.price_data.recurring.interval_count ?? 1) } } }],
          },
        });
        session.subscription = subscriptionId;
      }
      return structuredClone(session);
    },
    expireSession(id) {
      const session = must(sessions, id, "checkout.session");
      session.status = "expired";
      return structuredClone(session);
    },
    paymentIntent: (id) => structuredClone(must(paymentIntents, id, "payment_intent")),
    charge(id) {
      const charge = must(charges, id, "charge");
      return structuredClone({ ...charge, refunds: refundList(charge) });
    },
    refund(paymentIntent, cents) {
      const intent = must(paymentIntents, paymentIntent, "payment_intent");
      const charge = must(charges, intent.latest_charge, "charge");
      if (charge.amount_refunded + cents > charge.amount) throw new Error(`fake stripe: refund of ${cents} exceeds what is left of ${charge.id}`);
      const refund = {
        id: newId("re"),
        object: "refund",
        amount: cents,
        charge: charge.id,
        created: nowSeconds(),
        currency: charge.currency,
        metadata: {},
        payment_intent: paymentIntent,
        reason: "requested_by_customer",
        status: "succeeded",
      };
      refunds.set(refund.id, refund);
      charge.amount_refunded += cents;
      charge.refunded = charge.amount_refunded === charge.amount;
      return { refund: structuredClone(refund), charge: fake.charge(charge.id) };
    },
    dispute(paymentIntent, cents) {
      const intent = must(paymentIntents, paymentIntent, "payment_intent");
      const charge = must(charges, intent.latest_charge, "charge");
      const dispute = {
        id: newId("dp"),
        object: "dispute",
        amount: cents ?? charge.amount,
        charge: charge.id,
        created: nowSeconds(),
        currency: charge.currency,
        is_charge_refundable: false,
        metadata: {},
        payment_intent: paymentIntent,
        reason: "fraudulent",
        status: "needs_response",
      };
      disputes.set(dispute.id, dispute);
      charge.disputed = true;
      return structuredClone(dispute);
    },
    subscription: (id) => structuredClone(must(subscriptions, id, "subscription")),
    invoice(subscriptionId) {
      const subscription = must(subscriptions, subscriptionId, "subscription");
      const price = subscription.items.data[0].price;
      const id = newId("in");
      const created = nowSeconds();
      const invoice = {
        id,
        object: "invoice",
        amount_due: price.unit_amount,
        amount_paid: price.unit_amount,
        amount_remaining: 0,
        billing_reason: [...invoices.values()].some((other) => other.parent.subscription_details.subscription === subscriptionId) ? "subscription_cycle" : "subscription_create",
        created,
        currency: subscription.currency,
        customer: subscription.customer,
        lines: {
          object: "list",
          data: [
            {
              id: newId("il"),
              object: "line_item",
              amount: price.unit_amount,
              currency: subscription.currency,
              metadata: structuredClone(subscription.metadata),
              parent: { type: "subscription_item_details", subscription_item_details: { subscription: subscriptionId, subscription_item: subscription.items.data[0].id } },
              period: { start: created, end: created + 30 * 86400 },
            },
          ],
          has_more: false,
        },
        parent: { type: "subscription_details", quote_details: null, subscription_details: { metadata: structuredClone(subscription.metadata), subscription: subscriptionId } },
        status: "paid",
      };
      invoices.set(id, invoice);
      return structuredClone(invoice);
    },
    cancelSubscription(id) {
      const subscription = must(subscriptions, id, "subscription");
      subscription.status = "canceled";
      subscription.canceled_at = nowSeconds();
      return structuredClone(subscription);
    },
    async stop() {
      await server.stop(true);
    },
  };
  return fake;
}
