import { InvalidRequestError } from "../../core/errors.ts";
import { usdToNano, type NanoUsd } from "../../core/money.ts";
import { REQUEST_ID_HEADER } from "../../core/pipeline.ts";
import { openaiChat } from "../../formats/openai-chat/index.ts";
import { generateApiKey, hashApiKey, maskApiKey } from "../auth/keys.ts";
import type { DashboardDeps } from "./deps.ts";

/** The setting that names the house account (the account that pays for every route proof). */
export const HOUSE_ACCOUNT_SETTING = "dashboard.route_proof.house_account";
export const HOUSE_ACCOUNT_NAME = "house: route proofs";
/** The setting that holds an account's proof: claimed while it runs, its result once done. */
export const proofSetting = (accountId: string) => `dashboard.route_proof:${accountId}`;

/** The answer is kept (and shown) up to this many characters. */
export const ANSWER_LIMIT = 2_000;
/**
 * A claim still "running" after this long belongs to a process that died mid-proof (a proof is one
 * non-streaming request of at most a few thousand tokens): the account may run its proof again.
 */
const STALE_CLAIM_MS = 15 * 60_000;

/** What one proof showed, as stored in its setting (JSON). */
export interface ProofResult {
  /** The model the gateway answered with. */
  model: string;
  /** The model the account chose. */
  requested: string;
  /** The prompt sent (the config's at the time). */
  prompt: string;
  latency_ms: number;
  answer: string;
  request_id: string;
  /** What the house paid, nano-USD; null when the generation record could not be read back. */
  cost: NanoUsd | null;
  /** Epoch ms when the proof ran. */
  at: number;
}

export type ProofState = { state: "none" } | { state: "running"; at: number } | { state: "done"; result: ProofResult };

export type ProofOutcome =
  | { kind: "done"; result: ProofResult }
  /** The account's proof ran already (or is running): nothing was sent. */
  | { kind: "already"; state: Exclude<ProofState, { state: "none" }> }
  /** No answer came back: the claim was released, the account may try again. */
  | { kind: "failed"; status: number; message: string };

export type RouteProofDeps = Pick<DashboardDeps, "config" | "store" | "auth" | "catalog" | "gateway" | "log" | "now" | "counters">;

/**
 * The one-off live route proof: the fixed prompt of the config, through the real pipeline, once per account,
 * paid by the house. The request goes with a temporary key of the house account (allowed the chosen model
 * only, deleted right after), so the generation record and its debit land on the house account through the
 * normal metering and nothing touches the account that asked.
 */
export function createRouteProof(deps: RouteProofDeps) {
  const { config, store, log } = deps;
  const proof = config.route_proof;
  const float = usdToNano(proof.house_float_usd);
  let houseId: Promise<string> | undefined;
  /** The models offered: the config's list, else every chat model of the catalog. */
  function models(): string[] {
    if (proof.models.length > 0) return [...proof.models];
    return (deps.catalog?.all() ?? []).filter((model) => model.kind === "chat").map((model) => model.id);
  }

  function parse(value: string | null): ProofState {
    if (value === null) return { state: "none" };
    try {
      const stored = JSON.parse(value) as { state?: string; at?: number } & Partial<ProofResult>;
      if (stored.state === "running") return { state: "running", at: Number(stored.at) || 0 };
      if (stored.state === "done") {
        const { state: _state, ...result } = stored;
        return { state: "done", result: result as ProofResult };
      }
    } catch {
      // unreadable: treated as run (never a second free request because of a bad row)
    }
    return { state: "running", at: deps.now() };
  }

  async function state(accountId: string): Promise<ProofState> {
    return parse(await store.getSetting(proofSetting(accountId)));
  }

  /** The house account's id: created on first use, remembered in the settings (the claim's winner among instances). */
  function house(): Promise<string> {
    houseId ??= (async () => {
      const known = await store.getSetting(HOUSE_ACCOUNT_SETTING);
      if (known) return known;
      const account = await store.createAccount(HOUSE_ACCOUNT_NAME);
      if (await store.claimSetting(HOUSE_ACCOUNT_SETTING, account.id)) return account.id;
      // Another instance named its own first; this one's account stays empty.
      const winner = await store.getSetting(HOUSE_ACCOUNT_SETTING);
      if (!winner) throw new Error("the house account setting was claimed but reads empty");
      return winner;
    })().catch((error) => {
      houseId = undefined; // a store hiccup: the next proof tries again
      throw error;
    });
    return houseId;
  }

  /** Claims the account's one proof; false when it ran or is running (a stale running claim is taken over). */
  async function claim(accountId: string): Promise<boolean> {
    const name = proofSetting(accountId);
    const value = JSON.stringify({ state: "running", at: deps.now() });
    if (await store.claimSetting(name, value)) return true;
    const current = await state(accountId);
    if (current.state !== "running" || deps.now() - current.at < STALE_CLAIM_MS) return false;
    log.warn("route proof: taking over a stale claim", { account_id: accountId });
    await store.deleteSetting(name);
    return store.claimSetting(name, value);
  }

  /** Runs the account's proof with `model`; InvalidRequestError when the model is not offered. */
  async function run(accountId: string, model: string): Promise<ProofOutcome> {
    if (!models().includes(model)) throw new InvalidRequestError("Choose one of the models offered for the route proof.");
    if (!(await deps.counters.takeRouteProofSlot())) {
      return { kind: "failed", status: 429, message: `route proofs are limited to ${proof.per_hour} an hour on this server; try again later` };
    }
    if (!(await claim(accountId))) {
      const current = await state(accountId);
      return { kind: "already", state: current.state === "none" ? { state: "running", at: deps.now() } : current };
    }
    let released = false;
    const release = async () => {
      released = true;
      await store.deleteSetting(proofSetting(accountId));
    };
    try {
      const outcome = await send(accountId, model);
      if (outcome.kind === "done") {
        await store.setSetting(proofSetting(accountId), JSON.stringify({ state: "done", ...outcome.result }));
      } else {
        await release();
      }
      return outcome;
    } catch (error) {
      if (!released) await release().catch((failure) => log.error("route proof: claim not released", { account_id: accountId, error: String(failure) }));
      throw error;
    }
  }

  async function send(accountId: string, model: string): Promise<ProofOutcome> {
    const houseAccount = await house();
    const proofId = crypto.randomUUID();
    const { balance } = await store.accountTotals(houseAccount);
    if (balance < float) {
      await store.addCredit({ accountId: houseAccount, amount: float - balance, kind: "promotional", reference: `route-proof:${proofId}` });
    }
    const secret = generateApiKey();
    const keyHash = hashApiKey(secret);
    const key = await store.createKey({
      id: "key_" + crypto.randomUUID().replaceAll("-", "").slice(0, 24),
      accountId: houseAccount,
      name: `route proof for ${accountId}`,
      keyHash,
      label: maskApiKey(secret),
      limit: null,
      models: [model],
      requestsPerMinute: null,
      tokensPerMinute: null,
      expiresAt: null,
    });
    try {
      const request = new Request("http://gateway.internal/v1/chat/completions", {
        method: "POST",
        headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
        body: JSON.stringify({ model, messages: [{ role: "user", content: proof.prompt }], max_tokens: proof.max_tokens }),
      });
      const started = performance.now();
      const response = await deps.gateway.handle(request, openaiChat);
      const text = await response.text();
      const latency = Math.round(performance.now() - started);
      const requestId = response.headers.get(REQUEST_ID_HEADER) ?? "";
      let body: any = null;
      try {
        body = JSON.parse(text);
      } catch {
        // not JSON: reported below
      }
      if (!response.ok) {
        const message = typeof body?.error?.message === "string" ? body.error.message : `the gateway answered ${response.status}`;
        log.info("route proof failed", { account_id: accountId, model, status: response.status, request_id: requestId });
        return { kind: "failed", status: response.status, message };
      }
      const content = body?.choices?.[0]?.message?.content;
      await store.flush();
      const generation = requestId ? await store.findGeneration(houseAccount, requestId) : null;
      const result: ProofResult = {
        model: typeof body?.model === "string" ? body.model : model,
        requested: model,
        prompt: proof.prompt,
        latency_ms: latency,
        answer: typeof content === "string" ? content.slice(0, ANSWER_LIMIT) : "",
        request_id: requestId,
        cost: generation ? generation.totalCost : null,
        at: deps.now(),
      };
      log.info("route proof done", { account_id: accountId, model, request_id: requestId });
      return { kind: "done", result };
    } finally {
      await store
        .deleteKey(key.id)
        .catch((error) => log.error("route proof: temporary key not deleted", { key_id: key.id, error: String(error) }))
        .finally(() => deps.auth.forget(keyHash));
    }
  }

  return { prompt: proof.prompt, models, state, run, house };
}

export type RouteProof = ReturnType<typeof createRouteProof>;
