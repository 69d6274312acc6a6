import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { PLAN_CYCLE_MS } from "../../src/plugins/budget/plans.ts";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { chargeRefundedEvent, checkoutSessionEvent, deliver, disputeCreatedEvent, invoicePaidEvent, signature, stripeEvent, subscriptionDeletedEvent } from "../fake-stripe/events.ts";
import { startFakeStripe, type FakeStripe } from "../fake-stripe/server.ts";

/**
 * The card fault suite: a real gateway (SQLite) with payments-stripe on, Stripe's API faked over HTTP, webhook events
 * signed with the library's own helper. Every money figure is checked exactly, through the API the account and the
 * operator read.
 */

setDefaultTimeout(30_000);

const WEBHOOK_SECRET = "whsec_test_gateway_0123456789abcdef";
const MODEL = "gpt-6-luna";

let fake: FakeStripe;
let t: TestGateway;

beforeAll(async () => {
  fake = await startFakeStripe();
  t = await startTestGateway({ env: { STRIPE_SECRET_KEY: fake.secretKey, STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET, STRIPE_API_BASE: fake.url, STRIPE_SUCCESS_URL: "", STRIPE_CANCEL_URL: "" } });
});
afterAll(async () => {
  await t?.stop();
  await fake?.stop();
});

type Account = Awaited<ReturnType<TestGateway["newAccountWithKey"]>>;

async function call(key: string, method: string, path: string, body?: unknown) {
  const response = await fetch(t.url + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

/** The account's balance (USD) as the operator reads it. */
async function balance(accountId: string): Promise<number> {
  const account = await t.admin("GET", `/admin/v1/accounts/${accountId}`);
  expect(account.status).toBe(200);
  return account.body.data.balance;
}

async function topupOf(account: Account, id: string) {
  const read = await call(account.key, "GET", `/v1/credits/topups/${id}`);
  expect(read.status).toBe(200);
  return read.body.data;
}

/** A card top-up through the API, and the Checkout Session the fake made for it. */
async function cardTopup(account: Account, amount: number | string) {
  const created = await call(account.key, "POST", "/v1/credits/topups", { method: "card", amount });
  expect(created).toMatchObject({ status: 201 });
  const topup = created.body.data;
  const session = fake.sessions().find((candidate) => candidate.client_reference_id === topup.id);
  if (!session) throw new Error(`no Checkout Session for ${topup.id}`);
  return { topup, session };
}

const send = (event: Record<string, any>, options: { secret?: string; header?: string | null; payload?: string } = {}) =>
  deliver(t.url, event, { secret: WEBHOOK_SECRET, ...options });

/** A top-up paid and credited: its session, PaymentIntent and the completed event. */
async function paidTopup(account: Account, amount: number) {
  const { topup, session } = await cardTopup(account, amount);
  const paid = fake.completeSession(session.id);
  const event = checkoutSessionEvent("checkout.session.completed", paid);
  expect(await send(event)).toMatchObject({ status: 200, body: { received: true, applied: ["credit"] } });
  return { topup, session: paid, paymentIntent: paid.payment_intent as string, event };
}

async function newAccount(): Promise<Account> {
  return t.newAccountWithKey({ credit: 0 });
}

/** Polls until `check` holds (metering writes are group-committed), failing after a deadline. */
async function eventually<T>(read: () => Promise<T>, check: (value: T) => boolean, what: string): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const value = await read();
    if (check(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: last ${JSON.stringify(value)}`);
    await Bun.sleep(20);
  }
}

describe("card top-ups: the Checkout Session", () => {
  it("is made from our record: mode payment, our amount in USD cents, our ids, the Billing page, idempotent per top-up", async () => {
    const account = await newAccount();
    const before = fake.requests.length;
    const { topup, session } = await cardTopup(account, "19.99");
    expect(topup).toMatchObject({ method: "card", amount: 19.99, status: "pending", checkout_url: session.url, credited: false });
    expect(topup.expires_at).toBe(new Date(session.expires_at * 1000).toISOString());
    const [request] = fake.requests.slice(before);
    expect(request!.method).toBe("POST");
    expect(request!.path).toBe("/v1/checkout/sessions");
    expect(request!.headers["idempotency-key"]).toBe(topup.id);
    expect(request!.raw).toContain("line_items[0][price_data][unit_amount]=1999");
    expect(request!.params).toEqual({
      mode: "payment",
      line_items: [{ quantity: "1", price_data: { currency: "usd", unit_amount: "1999", product_data: { name: "Gateway credit" } } }],
      client_reference_id: topup.id,
      metadata: { topup_id: topup.id, account_id: account.accountId },
      payment_intent_data: { metadata: { topup_id: topup.id, account_id: account.accountId } },
      success_url: `${t.url}/dashboard/billing`,
      cancel_url: `${t.url}/dashboard/billing`,
    });
  });

  it("refuses a card top-up below 5 USD, naming the minimum, without asking Stripe", async () => {
    const account = await newAccount();
    const before = fake.requests.length;
    const refused = await call(account.key, "POST", "/v1/credits/topups", { method: "card", amount: 4.99 });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: "invalid_request", param: "amount" });
    expect(refused.body.error.message).toContain("5 USD");
    expect(fake.requests.length).toBe(before);
    expect((await call(account.key, "POST", "/v1/credits/topups", { method: "card", amount: 5 })).status).toBe(201);
  });

  it("answers 502 when Stripe is unreachable, and the secret key never leaves the gateway", async () => {
    const account = await newAccount();
    fake.outage = true;
    try {
      const failed = await call(account.key, "POST", "/v1/credits/topups", { method: "card", amount: 10 });
      expect(failed.status).toBe(502);
      expect(failed.body.error.message).toContain("card payments are briefly unavailable");
      expect(JSON.stringify(failed.body)).not.toContain(fake.secretKey);
    } finally {
      fake.outage = false;
    }
    expect((await call(account.key, "POST", "/v1/credits/topups", { method: "card", amount: 10 })).status).toBe(201);
  });
});

describe("the webhook: credited exactly once", () => {
  it("a valid checkout.session.completed credits our amount once: balance + amount, exactly", async () => {
    const account = await newAccount();
    const { topup, paymentIntent } = await paidTopup(account, 25);
    expect(await balance(account.accountId)).toBe(25);
    expect(await topupOf(account, topup.id)).toMatchObject({ status: "credited", credited: true, flag: null, taken_back: 0 });
    const credits = await call(account.key, "GET", "/v1/credits");
    expect(credits.body.data).toMatchObject({ total_credits: 25, balance: 25 });
    const admin = await t.admin("GET", `/admin/v1/accounts/${account.accountId}/topups`);
    expect(admin.body.data[0]).toMatchObject({ id: topup.id, payment_ref: paymentIntent });
  });

  it("the same event replayed 10 times in a row and 10 times at once credits once", async () => {
    const account = await newAccount();
    const { event } = await paidTopup(account, 30);
    for (let i = 0; i < 10; i++) expect(await send(event)).toMatchObject({ status: 200, body: { applied: [] } });
    const concurrent = await Promise.all(Array.from({ length: 10 }, () => send(event)));
    expect(concurrent.map((answer) => answer.status)).toEqual(Array(10).fill(200));
    expect(await balance(account.accountId)).toBe(30);
  });

  it("ten different events of one payment at once (completed and async_payment_succeeded, new event ids) credit once", async () => {
    const account = await newAccount();
    const { session } = await cardTopup(account, 12);
    const paid = fake.completeSession(session.id);
    const events = Array.from({ length: 10 }, (_, i) => checkoutSessionEvent(i % 2 ? "checkout.session.async_payment_succeeded" : "checkout.session.completed", paid));
    const answers = await Promise.all(events.map((event) => send(event)));
    expect(answers.map((answer) => answer.status)).toEqual(Array(10).fill(200));
    expect(answers.filter((answer) => answer.body.applied.includes("credit")).length).toBe(1);
    expect(await balance(account.accountId)).toBe(12);
  });

  it("an async payment: completed unpaid does nothing, async_payment_succeeded credits", async () => {
    const account = await newAccount();
    const { topup, session } = await cardTopup(account, 8);
    const unpaid = fake.completeSession(session.id, { paymentStatus: "unpaid" });
    expect(await send(checkoutSessionEvent("checkout.session.completed", unpaid))).toMatchObject({ status: 200, body: { applied: [] } });
    expect((await topupOf(account, topup.id)).status).toBe("pending");
    const paid = fake.completeSession(session.id);
    expect(await send(checkoutSessionEvent("checkout.session.async_payment_succeeded", paid))).toMatchObject({ status: 200, body: { applied: ["credit"] } });
    expect(await balance(account.accountId)).toBe(8);
  });

  it("out of order: expired after completed changes nothing; an unpaid session's expiry expires the top-up", async () => {
    const account = await newAccount();
    const { topup, session } = await paidTopup(account, 10);
    expect(await send(checkoutSessionEvent("checkout.session.expired", { ...session, status: "expired" }))).toMatchObject({ status: 200 });
    expect(await topupOf(account, topup.id)).toMatchObject({ status: "credited" });
    expect(await balance(account.accountId)).toBe(10);

    const other = await cardTopup(account, 6);
    expect(await send(checkoutSessionEvent("checkout.session.expired", fake.expireSession(other.session.id)))).toMatchObject({ status: 200, body: { applied: ["expire"] } });
    expect((await topupOf(account, other.topup.id)).status).toBe("expired");
    expect(await balance(account.accountId)).toBe(10);
  });

  it("an event about a Checkout Session that is not ours is answered 200 and changes nothing", async () => {
    const stranger = { id: "cs_test_stranger", object: "checkout.session", mode: "payment", payment_status: "paid", amount_total: 500, currency: "usd", metadata: {}, client_reference_id: null, payment_intent: "pi_stranger" };
    expect(await send(checkoutSessionEvent("checkout.session.completed", stranger))).toEqual({ status: 200, body: { received: true, applied: [] } });
    const unknownTopup = { ...stranger, metadata: { topup_id: "tu_000000000000000000000000" } };
    expect(await send(checkoutSessionEvent("checkout.session.completed", unknownTopup))).toEqual({ status: 200, body: { received: true, applied: [] } });
    expect(await send(stripeEvent("customer.created", { id: "cus_1", object: "customer" }))).toEqual({ status: 200, body: { received: true, applied: [] } });
  });
});

describe("the webhook: signatures", () => {
  it("refuses a forged signature, another endpoint's secret, a missing header and a body changed after signing (400); the genuine one credits", async () => {
    const account = await newAccount();
    const { topup, session } = await cardTopup(account, 20);
    const event = checkoutSessionEvent("checkout.session.completed", fake.completeSession(session.id));
    const payload = JSON.stringify(event);
    const forged = `t=${Math.floor(Date.now() / 1000)},v1=${"ab".repeat(32)}`;
    const tampered = JSON.stringify({ ...event, data: { object: { ...event.data.object, amount_total: 1 } } });
    const refusals = [
      await send(event, { header: forged }),
      await send(event, { secret: "whsec_another_endpoint_secret" }),
      await send(event, { header: null }),
      await send(event, { payload: tampered, header: await signature(payload, WEBHOOK_SECRET) }),
      await send(event, { header: await signature(payload, WEBHOOK_SECRET, Math.floor(Date.now() / 1000) - 3600) }),
    ];
    for (const refusal of refusals) {
      expect(refusal.status).toBe(400);
      expect(refusal.body.error.code).toBe("invalid_request");
      expect(JSON.stringify(refusal.body)).not.toContain(WEBHOOK_SECRET);
    }
    expect((await topupOf(account, topup.id)).status).toBe("pending");
    expect(await balance(account.accountId)).toBe(0);
    expect(await send(event, { payload })).toMatchObject({ status: 200, body: { applied: ["credit"] } });
    expect(await balance(account.accountId)).toBe(20);
  });
});

describe("the webhook: what was paid differs from the record", () => {
  it("an amount or a currency other than ours is flagged (paid, flag set), never credited", async () => {
    const account = await newAccount();
    const lower = await cardTopup(account, 50);
    const lowerEvent = checkoutSessionEvent("checkout.session.completed", fake.completeSession(lower.session.id, { amountTotal: 500 }));
    expect(await send(lowerEvent)).toMatchObject({ status: 200, body: { applied: ["flag"] } });
    expect(await topupOf(account, lower.topup.id)).toMatchObject({ status: "paid", credited: false, flag: "amount paid 5.00 USD differs from 50.00 USD" });

    const euro = await cardTopup(account, 50);
    const euroEvent = checkoutSessionEvent("checkout.session.completed", fake.completeSession(euro.session.id, { currency: "eur" }));
    expect(await send(euroEvent)).toMatchObject({ status: 200, body: { applied: ["flag"] } });
    expect(await topupOf(account, euro.topup.id)).toMatchObject({ status: "paid", credited: false, flag: "paid in EUR, the top-up is in USD" });

    // A later event of the same payment does not credit it either.
    expect(await send(checkoutSessionEvent("checkout.session.async_payment_succeeded", fake.session(lower.session.id)))).toMatchObject({ status: 200 });
    expect(await balance(account.accountId)).toBe(0);
  });
});

describe("the webhook: refunds and disputes", () => {
  it("a partial refund, then the rest: each taken back by its new part; replays and repeats take nothing", async () => {
    const account = await newAccount();
    const { topup, paymentIntent } = await paidTopup(account, 40);
    const first = fake.refund(paymentIntent, 1000);
    // Current API versions: the event's charge does not list its refunds; the gateway lists them through the API.
    const firstEvent = chargeRefundedEvent(first.charge, { includeRefunds: false, previousAmountRefunded: 0 });
    expect(await send(firstEvent)).toMatchObject({ status: 200, body: { applied: ["take-back"] } });
    expect(await balance(account.accountId)).toBe(30);
    expect(await topupOf(account, topup.id)).toMatchObject({ status: "refunded", taken_back: 10 });

    const rest = fake.refund(paymentIntent, 3000);
    // This one lists both refunds (older API versions include them): only the new one takes back.
    const restEvent = chargeRefundedEvent(rest.charge, { previousAmountRefunded: 1000 });
    expect(rest.charge.refunds.data.length).toBe(2);
    expect(await send(restEvent)).toMatchObject({ status: 200 });
    expect(await balance(account.accountId)).toBe(0);
    expect(await topupOf(account, topup.id)).toMatchObject({ status: "refunded", taken_back: 40 });

    for (const event of [firstEvent, restEvent, firstEvent]) expect((await send(event)).status).toBe(200);
    await Promise.all(Array.from({ length: 5 }, () => send(restEvent)));
    expect(await balance(account.accountId)).toBe(0);
    const ledger = await t.admin("GET", `/admin/v1/accounts/${account.accountId}`);
    expect(ledger.body.data).toMatchObject({ total_credits: 0, balance: 0 });
  });

  it("out of order: a refund before its payment is recorded answers 503 (Stripe retries); after the payment the retry takes back", async () => {
    const account = await newAccount();
    const { topup, session } = await cardTopup(account, 15);
    const paid = fake.completeSession(session.id);
    const { charge } = fake.refund(paid.payment_intent, 1500);
    const refundEvent = chargeRefundedEvent(charge, { includeRefunds: false });
    const early = await send(refundEvent);
    expect(early.status).toBe(503);
    expect((await topupOf(account, topup.id)).status).toBe("pending");
    expect(await send(checkoutSessionEvent("checkout.session.completed", paid))).toMatchObject({ status: 200, body: { applied: ["credit"] } });
    expect(await balance(account.accountId)).toBe(15);
    expect(await send(refundEvent)).toMatchObject({ status: 200, body: { applied: ["take-back"] } });
    expect(await balance(account.accountId)).toBe(0);
    expect(await topupOf(account, topup.id)).toMatchObject({ status: "refunded", taken_back: 15 });
  });

  it("a refund of a payment that is not a top-up (no such PaymentIntent here, none of our metadata) is answered 200 and left alone", async () => {
    const stranger = { id: "ch_stranger", object: "charge", amount: 500, amount_refunded: 500, currency: "usd", payment_intent: null, metadata: {}, refunds: { object: "list", has_more: false, data: [{ id: "re_stranger", object: "refund", amount: 500, status: "succeeded", created: 1 }] } };
    expect(await send(chargeRefundedEvent(stranger))).toEqual({ status: 200, body: { received: true, applied: [] } });
  });

  it("a dispute takes the amount back and blocks the account's keys (403) until an operator unblocks it", async () => {
    const account = await newAccount();
    const second = await t.admin("POST", `/admin/v1/accounts/${account.accountId}/keys`, { name: "second key" });
    const { topup, paymentIntent } = await paidTopup(account, 20);
    expect((await call(account.key, "GET", "/v1/credits")).status).toBe(200);
    const dispute = fake.dispute(paymentIntent);
    const event = disputeCreatedEvent(dispute);
    expect(await send(event)).toMatchObject({ status: 200, body: { applied: ["take-back"] } });
    expect(await balance(account.accountId)).toBe(0);
    expect((await call(account.key, "GET", `/v1/credits/topups/${topup.id}`)).status).toBe(403);
    for (const key of [account.key, second.body.data.key]) {
      expect((await call(key, "GET", "/v1/credits")).status).toBe(403);
      const chat = await t.client(key).chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 8 }).catch((error) => error);
      expect(chat.status).toBe(403);
    }
    // Replayed: nothing more taken back.
    expect((await send(event)).status).toBe(200);
    expect(await balance(account.accountId)).toBe(0);

    const unblocked = await t.admin("POST", `/admin/v1/accounts/${account.accountId}/unblock`);
    expect(unblocked).toMatchObject({ status: 200, body: { data: { blocked: false, was_blocked: true } } });
    expect((await call(account.key, "GET", "/v1/credits")).status).toBe(200);
    expect(await topupOf(account, topup.id)).toMatchObject({ status: "disputed", taken_back: 20 });
  });

  it("a dispute that names only its charge finds the payment through the API", async () => {
    const account = await newAccount();
    const { paymentIntent } = await paidTopup(account, 9);
    const dispute = { ...fake.dispute(paymentIntent, 400), payment_intent: null };
    expect(await send(disputeCreatedEvent(dispute))).toMatchObject({ status: 200, body: { applied: ["take-back"] } });
    expect(await balance(account.accountId)).toBe(5);
    await t.admin("POST", `/admin/v1/accounts/${account.accountId}/unblock`);
  });

  it("a refund after the credit was spent leaves a debt: a negative balance in /v1/credits, and the next request refused", async () => {
    const account = await newAccount();
    const { paymentIntent } = await paidTopup(account, 5);
    const chat = await t.client(account.key).chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hello" }], max_tokens: 16 });
    expect(chat.choices[0]!.message.content).toBeTruthy();
    const spent = await eventually(
      async () => (await call(account.key, "GET", "/v1/credits")).body.data,
      (credits) => credits.total_usage > 0,
      "the request's debit",
    );
    expect(spent.balance).toBeLessThan(5);
    const { charge } = fake.refund(paymentIntent, 500);
    expect(await send(chargeRefundedEvent(charge))).toMatchObject({ status: 200, body: { applied: ["take-back"] } });
    const credits = (await call(account.key, "GET", "/v1/credits")).body.data;
    expect(credits.balance).toBeLessThan(0);
    expect(credits.balance).toBeCloseTo(-spent.total_usage, 9);
    const refused = await t.client(account.key).chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "again" }], max_tokens: 16 }).catch((error) => error);
    expect([400, 402]).toContain(refused.status);
    expect(refused.error?.code ?? refused.code).toBe("insufficient_balance");
    // A top-up pays the debt first.
    await paidTopup(account, 10);
    expect(await balance(account.accountId)).toBeCloseTo(10 - spent.total_usage, 9);
  });
});

describe("the webhook: a credit that fails", () => {
  it("answers 5xx while the store cannot write (Stripe retries), and the retry after recovery credits once", async () => {
    const account = await newAccount();
    const { topup, session } = await cardTopup(account, 33);
    const event = checkoutSessionEvent("checkout.session.completed", fake.completeSession(session.id));
    // Another connection holds the database's write lock: the gateway's write waits its busy timeout, then fails.
    const locker = new Database(join(t.dataDir, "gateway.db"));
    locker.exec("BEGIN IMMEDIATE");
    let failed;
    try {
      failed = await send(event);
    } finally {
      locker.exec("ROLLBACK");
      locker.close();
    }
    expect(failed.status).toBeGreaterThanOrEqual(500);
    expect((await topupOf(account, topup.id)).status).toBe("pending");
    expect(await balance(account.accountId)).toBe(0);
    expect(await send(event)).toMatchObject({ status: 200, body: { applied: ["credit"] } });
    expect(await send(event)).toMatchObject({ status: 200, body: { applied: [] } });
    expect(await balance(account.accountId)).toBe(33);
  });
});

describe("card plans: subscriptions", () => {
  it("a card plan is a subscription checkout; invoice.paid twice gives two consecutive cycles, a replay none more; deletion stops renewal", async () => {
    const account = await newAccount();
    const before = fake.requests.length;
    const bought = await t.admin("POST", `/admin/v1/accounts/${account.accountId}/plan`, { plan: "pro", funding: "card" });
    const checkoutUrl: string = bought.body?.data?.checkout_url;
    expect(bought).toMatchObject({ status: 201, body: { data: { plan: "pro", funding: "card", status: "pending" } } });
    expect(checkoutUrl.startsWith("https://checkout.stripe.com/")).toBe(true);
    const request = fake.requests.slice(before).find((entry) => entry.path === "/v1/checkout/sessions")!;
    expect(request.params).toMatchObject({
      mode: "subscription",
      line_items: [{ quantity: "1", price_data: { currency: "usd", unit_amount: "2000", recurring: { interval: "day", interval_count: "30" }, product_data: { name: "Plan pro" } } }],
      metadata: { account_id: account.accountId, plan: "pro" },
      subscription_data: { metadata: { account_id: account.accountId, plan: "pro" } },
    });
    const session = fake.sessions().find((candidate) => candidate.url === checkoutUrl)!;
    const completed = fake.completeSession(session.id);
    // The subscription's checkout completing starts nothing: its first invoice does.
    expect(await send(checkoutSessionEvent("checkout.session.completed", completed))).toMatchObject({ status: 200, body: { applied: [] } });
    const store = t.gateway.service("storage")!;
    expect(await store.activePlan(account.accountId, Date.now())).toBeNull();

    const firstInvoice = invoicePaidEvent(fake.invoice(completed.subscription));
    expect(await send(firstInvoice)).toMatchObject({ status: 200, body: { applied: ["plan-cycle"] } });
    expect(await balance(account.accountId)).toBe(5); // the plan's bonus credit; the price was paid by card
    const first = (await store.activePlan(account.accountId, Date.now()))!;
    expect(first).toMatchObject({ plan: "pro", funding: "card", renewing: true });
    expect(first.endsAt - first.startedAt).toBe(PLAN_CYCLE_MS);

    const secondInvoice = invoicePaidEvent(fake.invoice(completed.subscription));
    expect(await send(secondInvoice)).toMatchObject({ status: 200, body: { applied: ["plan-cycle"] } });
    for (const replay of [firstInvoice, secondInvoice, secondInvoice]) expect(await send(replay)).toMatchObject({ status: 200, body: { applied: [] } });
    expect(await balance(account.accountId)).toBe(10);
    const second = (await store.activePlan(account.accountId, first.endsAt + 1))!;
    expect(second.startedAt).toBe(first.endsAt);
    expect(second.endsAt).toBe(first.endsAt + PLAN_CYCLE_MS);
    expect(second).toMatchObject({ plan: "pro", funding: "card", renewing: true });
    // The first cycle runs to its end and no longer renews: the second follows it.
    expect(await store.activePlan(account.accountId, Date.now())).toMatchObject({ id: first.id, renewing: false });

    // The subscription ends: the running cycles stop renewing and end at their end.
    expect(await send(subscriptionDeletedEvent(fake.cancelSubscription(completed.subscription)))).toMatchObject({ status: 200, body: { applied: ["plan-stop"] } });
    expect(await store.activePlan(account.accountId, first.endsAt + 1)).toMatchObject({ id: second.id, renewing: false });
    expect(await store.activePlan(account.accountId, second.endsAt + 1)).toBeNull();
  });
});

describe("reconciliation", () => {
  it("reads Stripe's paid sessions, refunds and disputes through its list endpoints: a refund not taken back and a payment not credited show", async () => {
    const account = await newAccount();
    const since = Date.now() - 1000;
    const before = fake.requests.length;
    const { topup, paymentIntent } = await paidTopup(account, 7);
    fake.refund(paymentIntent, 200); // its charge.refunded never arrives
    const silent = await cardTopup(account, 6);
    const silentIntent = fake.completeSession(silent.session.id).payment_intent; // its checkout.session.completed never arrives
    const reconciled = await t.admin("GET", `/admin/v1/payments/reconcile?since=${new Date(since).toISOString()}`);
    expect(reconciled.status).toBe(200);
    const listed = fake.requests.slice(before).filter((request) => request.method === "GET").map((request) => request.path.split("?")[0]);
    expect(listed).toEqual(expect.arrayContaining(["/v1/checkout/sessions", "/v1/refunds", "/v1/disputes"]));
    const stripe = reconciled.body.data.processors.find((report: { name: string }) => report.name === "stripe");
    const mine = stripe.differences.filter((difference: { payment_ref: string }) => difference.payment_ref === paymentIntent || difference.payment_ref === silentIntent);
    expect(mine).toHaveLength(2);
    expect(mine).toContainEqual({ payment_ref: paymentIntent, topup_id: topup.id, kind: "returned_not_taken_back", processor_amount: 2, our_amount: 0 });
    expect(mine).toContainEqual({ payment_ref: silentIntent, topup_id: silent.topup.id, kind: "paid_not_credited", processor_amount: 6, our_amount: 0 });
  });
});

describe("without STRIPE_SECRET_KEY", () => {
  it("the plugin does nothing: no webhook route, no card method; a key without its webhook secret refuses to start", async () => {
    const off = await startTestGateway({ fake: t.fake, env: { STRIPE_SECRET_KEY: "", STRIPE_WEBHOOK_SECRET: "", STRIPE_API_BASE: "" } });
    try {
      const webhook = await fetch(`${off.url}/webhooks/stripe`, { method: "POST", headers: { "stripe-signature": "t=1,v1=00" }, body: "{}" });
      expect(webhook.status).toBe(404);
      const account = await off.newAccountWithKey({ credit: 0 });
      const card = await fetch(`${off.url}/v1/credits/topups`, {
        method: "POST",
        headers: { authorization: `Bearer ${account.key}`, "content-type": "application/json" },
        body: JSON.stringify({ method: "card", amount: 10 }),
      });
      expect(card.status).toBe(400);
    } finally {
      await off.stop();
    }
    const refused = await startTestGateway({ fake: t.fake, env: { STRIPE_SECRET_KEY: fake.secretKey, STRIPE_WEBHOOK_SECRET: "", STRIPE_API_BASE: fake.url } }).catch((error) => error);
    if (!(refused instanceof Error)) await refused.stop();
    expect(refused).toBeInstanceOf(Error);
    expect(String(refused.message)).toContain("STRIPE_WEBHOOK_SECRET");
  });
});
