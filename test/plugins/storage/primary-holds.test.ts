import { Database } from "bun:sqlite";
import { afterAll, afterEach, describe, expect, it } from "bun:test";
import { InvalidRequestError, UnavailableError } from "../../../src/core/errors.ts";
import type { WorkerLink } from "../../../src/core/workers.ts";
import { InsufficientFundsError } from "../../../src/plugins/storage/errors.ts";
import type { Funds, Repository, ReservationInput } from "../../../src/plugins/storage/repository.ts";
import { createSqliteRepository } from "../../../src/plugins/storage/sqlite/repository.ts";
import { accountWithKey, captureLog, inProcessPrimary, makeGeneration, removeTempDirs, tempDbPath } from "./helpers.ts";

// Holds of several workers kept in their primary (src/plugins/storage/sqlite/primary-holds.ts): what the repository
// contract (sqlite-repository.test.ts) does not show, with real SQLite files and the primary's part in this process.

const USD = 1_000_000_000;
const opened: Repository[] = [];
const primaries: ReturnType<typeof inProcessPrimary>[] = [];

afterEach(async () => {
  for (const repository of opened.splice(0)) await repository.close();
  for (const primary of primaries.splice(0)) await primary.close();
});
afterAll(() => removeTempDirs());

/** A primary and `count` workers on a fresh file, an account with `credit` USD and a key. */
async function workers(count: number, credit: number) {
  const path = tempDbPath();
  const primary = inProcessPrimary(path);
  primaries.push(primary);
  const repositories = Array.from({ length: count }, (_, i) => {
    const repository = createSqliteRepository(path, { holds: "primary", primary: primary.link(i), flushIntervalMs: 60_000, log: captureLog() });
    opened.push(repository);
    return repository;
  });
  const { account, key } = await accountWithKey(repositories[0]!);
  await repositories[0]!.addCredit({ accountId: account.id, amount: credit * USD, kind: "card", reference: crypto.randomUUID() });
  return { primary, repositories, account, key, path };
}

function request(accountId: string, keyId: string): ReservationInput {
  return { id: "req_" + crypto.randomUUID(), accountId, keyId, keyLimited: false, instanceId: "gw", createdAt: Date.now() };
}

/** What the next reservation would see of the account (a decision that holds nothing). */
async function available(repository: Repository, accountId: string, keyId: string): Promise<number> {
  let seen: Funds | undefined;
  await repository.reserve(request(accountId, keyId), (funds) => ((seen = funds), 0));
  return seen!.account;
}

describe("budget holds in the workers' primary (SQLite, GATEWAY_WORKERS)", () => {
  it("holds exactly what the decision fits when the funds are short, leaving the rest free for the other worker", async () => {
    const { repositories: [a, b], account, key } = await workers(2, 10);
    // Like the budget's output fitting: as much as the funds allow, up to 25 USD.
    const fit = (funds: Funds) => Math.min(25 * USD, Math.max(0, funds.account));
    expect(await a!.reserve(request(account.id, key.id), fit)).toBe(10 * USD);
    expect(await available(b!, account.id, key.id)).toBe(0);
    expect(await a!.holdsOutstanding()).toEqual({ count: 1, amount: 10 * USD });
  });

  it("drops the hold of a request its decision refuses on the real funds (a spend window's cap)", async () => {
    const { repositories: [a, b], account, key } = await workers(2, 100);
    const windowStart = Date.now() - 3_600_000;
    const capped = (funds: Funds) => {
      if ((funds.windows.hour?.spent ?? 0) + 30 * USD > 40 * USD) throw new InvalidRequestError("over the hour's cap");
      return 30 * USD;
    };
    expect(await a!.reserve({ ...request(account.id, key.id), windows: { hour: windowStart } }, capped)).toBe(30 * USD);
    await expect(b!.reserve({ ...request(account.id, key.id), windows: { hour: windowStart } }, capped)).rejects.toBeInstanceOf(InvalidRequestError);
    // The refused request's amount was held while its worker decided, and is free again.
    expect(await available(a!, account.id, key.id)).toBe(70 * USD);
    expect(await b!.holdsOutstanding()).toEqual({ count: 1, amount: 30 * USD });
  });

  it("never holds more than the funds across four workers reserving at once", async () => {
    const { repositories, account, key } = await workers(4, 7.5);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 200 }, (_, i) =>
        repositories[i % 4]!.reserve(request(account.id, key.id), (funds) => {
          if (funds.account < USD) throw new InsufficientFundsError("short");
          return USD;
        }),
      ),
    );
    expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(7);
    expect(await repositories[3]!.holdsOutstanding()).toEqual({ count: 7, amount: 7 * USD });
  });

  it("counts a settled request's queued debit instead of its hold on every worker, then the written debit, once", async () => {
    const { repositories: [a, b], account, key } = await workers(2, 10);
    const held = request(account.id, key.id);
    await a!.reserve(held, () => 4 * USD);
    expect(await available(b!, account.id, key.id)).toBe(6 * USD);
    a!.recordGeneration(makeGeneration(account.id, key.id, { id: held.id, inputCost: USD, outputCost: 0 }));
    await Bun.sleep(5); // worker a tells the primary on its next turn
    expect(await available(b!, account.id, key.id)).toBe(9 * USD);
    expect(await b!.holdsOutstanding()).toEqual({ count: 0, amount: 0 });
    await a!.flush();
    expect(await available(b!, account.id, key.id)).toBe(9 * USD);
    expect(await available(a!, account.id, key.id)).toBe(9 * USD);
  });

  it("a worker's own next request sees its settled debit at once, not the hold", async () => {
    const { repositories: [a], account, key } = await workers(1, 10);
    const held = request(account.id, key.id);
    await a!.reserve(held, () => 10 * USD);
    a!.recordGeneration(makeGeneration(account.id, key.id, { id: held.id, inputCost: USD, outputCost: 0 }));
    // Back to back, as a client's next request: no wait for the group commit.
    expect(await a!.reserve(request(account.id, key.id), (funds) => Math.min(funds.account, 5 * USD))).toBe(5 * USD);
  });

  it("drops the holds and queued debits of a worker that exits, and only its own", async () => {
    const { primary, repositories: [a, b], account, key } = await workers(2, 10);
    await a!.reserve(request(account.id, key.id), () => 3 * USD);
    await b!.reserve(request(account.id, key.id), () => 4 * USD);
    const settled = request(account.id, key.id);
    await b!.reserve(settled, () => USD);
    b!.recordGeneration(makeGeneration(account.id, key.id, { id: settled.id, inputCost: USD / 2, outputCost: 0 }));
    await Bun.sleep(5);
    expect(await available(a!, account.id, key.id)).toBe(2.5 * USD);
    // Worker 1 dies: its unwritten generation with it.
    primary.exit(1);
    expect(await available(a!, account.id, key.id)).toBe(7 * USD);
    expect(await a!.holdsOutstanding()).toEqual({ count: 1, amount: 3 * USD });
  });

  it("buys a plan from the balance only with funds no other worker holds", async () => {
    const { repositories: [a, b], account, key } = await workers(2, 25);
    const start = Date.now();
    const plan = (id: string) => ({ id, accountId: account.id, plan: "pro", funding: "balance" as const, price: 20 * USD, bonus: 0, startedAt: start, endsAt: start + 30 * 86_400_000, renewing: false });
    const held = request(account.id, key.id);
    await a!.reserve(held, () => 10 * USD);
    await expect(b!.purchasePlan(plan("plan_1"))).rejects.toBeInstanceOf(InsufficientFundsError);
    await a!.releaseReservation(held.id);
    expect((await b!.purchasePlan(plan("plan_2"))).balance).toBe(5 * USD);
    // The price's own hold is gone once the purchase is written: what is left is free.
    expect(await available(a!, account.id, key.id)).toBe(5 * USD);
  });

  it("answers 503 (UnavailableError) when the primary cannot read the file", async () => {
    const { repositories: [a], account, key, path } = await workers(1, 10);
    await a!.reserve(request(account.id, key.id), () => USD);
    // The table the funds are read from goes away (as a broken file would); the primary reads again within a second.
    const raw = new Database(path);
    raw.exec("alter table accounts rename to accounts_gone");
    raw.close();
    await Bun.sleep(1_100);
    await expect(a!.reserve(request(account.id, key.id), () => USD)).rejects.toBeInstanceOf(UnavailableError);
    expect(await a!.holdsOutstanding()).toEqual({ count: 1, amount: USD });
  });

  it("a hold whose answer came too late is given back: the refused request leaves nothing held", async () => {
    const path = tempDbPath();
    const primary = inProcessPrimary(path);
    primaries.push(primary);
    // The primary holds the ask, but its answer is lost (the worker's 2 s wait ran out first).
    const link = primary.link(0);
    let answersLost = true;
    const late: WorkerLink = {
      ...link,
      call: <T>(topic: string, payload: unknown) =>
        topic === "storage.hold" && answersLost
          ? link.call(topic, payload).then(() => Promise.reject<T>(new Error('primary "storage.hold": no answer within 2000 ms')))
          : link.call<T>(topic, payload),
    };
    const repository = createSqliteRepository(path, { holds: "primary", primary: late, flushIntervalMs: 60_000, log: captureLog() });
    opened.push(repository);
    const { account, key } = await accountWithKey(repository);
    await repository.addCredit({ accountId: account.id, amount: 10 * USD, kind: "card", reference: crypto.randomUUID() });
    await expect(repository.reserve(request(account.id, key.id), () => 4 * USD)).rejects.toBeInstanceOf(UnavailableError);
    answersLost = false;
    expect(await repository.holdsOutstanding()).toEqual({ count: 0, amount: 0 });
    expect(await available(repository, account.id, key.id)).toBe(10 * USD);
  });

  it("answers 503 (UnavailableError) when the primary is gone, holding nothing", async () => {
    const path = tempDbPath();
    const gone: WorkerLink = {
      index: 0,
      count: 1,
      call: () => Promise.reject(new Error("the primary process is gone")),
      publish() {},
      subscribe() {},
      answer() {},
    };
    const repository = createSqliteRepository(path, { holds: "primary", primary: gone, log: captureLog() });
    opened.push(repository);
    const { account, key } = await accountWithKey(repository);
    await expect(repository.reserve(request(account.id, key.id), () => USD)).rejects.toBeInstanceOf(UnavailableError);
  });
});
