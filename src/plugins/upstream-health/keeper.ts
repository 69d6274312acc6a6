import type { AttemptOutcome, Deployment, DeploymentHealth, ErrorClass } from "../../core/deployments.ts";
import type { BreakerConfig, Strategy } from "./schema.ts";
import { DeploymentStats } from "./stats.ts";

export type BreakerState = "closed" | "open" | "half_open";

/** A breaker or Retry-After change worth telling the other instances (redis-sync.ts). */
export interface Transition {
  provider: string;
  deployment: string;
  /** Epoch ms the open breaker lets a probe through; 0: the breaker closed. Absent: unchanged. */
  openUntil?: number;
  /** Epoch ms a Retry-After ends. Absent: unchanged. */
  waitUntil?: number;
}

/** The failures that count towards a breaker; rate_limited is a wait (Retry-After), the rest are not the deployment's fault. */
const BREAKER_FAILURES: ReadonlySet<ErrorClass> = new Set<ErrorClass>(["connection", "timeout", "server_error", "overloaded", "auth"]);

/** Sticky choices kept per provider (least recently used dropped first). */
export const STICKY_ENTRIES = 10_000;

const NONE: readonly Deployment[] = Object.freeze([]);

/** One deployment's health, as this instance knows it. */
export class DeploymentState {
  breaker: BreakerState = "closed";
  /** Consecutive failures, or failures in the current window (breaker.window_ms). */
  failures = 0;
  attempts = 0;
  windowStart = 0;
  /** Open: when a probe may go. */
  probeAt = 0;
  /** Half-open: when the probe was handed out (0: not yet), and whether its attempt started. */
  probeGivenAt = 0;
  probeStarted = false;
  /** A Retry-After: skipped until then. */
  waitUntil = 0;
  inFlight = 0;
  readonly stats = new DeploymentStats();
  /** order()'s answer when this is the only candidate. */
  single: readonly Deployment[];
  constructor(deployment: Deployment) {
    this.single = Object.freeze([deployment]);
  }
}

class ProviderState {
  constructor(readonly name: string) {}
  readonly deployments = new Map<string, DeploymentState>();
  turn = 0;
  readonly sticky = new Map<string, string>();
}

export interface HealthKeeperOptions {
  strategy: Strategy;
  breaker: BreakerConfig;
  maxRetryAfterMs: number;
  now: () => number;
  /** For weighted balancing; injectable for tests. */
  random?: () => number;
  /** Told of each breaker and Retry-After change made here (not of those applied from elsewhere). */
  onTransition?: (transition: Transition) => void;
}

/**
 * Every deployment's breaker, Retry-After wait, in-flight count and recent latency, in this process; orders
 * the candidates of a request by the configured strategy. order() reads only this memory and is synchronous.
 */
export class HealthKeeper implements DeploymentHealth {
  private readonly providers = new Map<string, ProviderState>();
  /** Transitions from other instances for deployments this one has not asked for yet, by provider and name. */
  private readonly unseen = new Map<string, Transition>();
  private readonly now: () => number;
  private readonly random: () => number;
  /** A probe handed out but never started (the request went elsewhere) is handed out again after this long. */
  private readonly probeLeaseMs: number;

  constructor(private readonly options: HealthKeeperOptions) {
    this.now = options.now;
    this.random = options.random ?? Math.random;
    this.probeLeaseMs = Math.min(options.breaker.cooldown_ms, 5_000);
  }

  order(provider: string, deployments: readonly Deployment[], stickyKey: string): readonly Deployment[] {
    const shared = this.provider(provider);
    const now = this.now();
    if (deployments.length === 1) {
      const only = deployments[0]!;
      const state = this.state(shared, only);
      return this.admit(state, now) ? state.single : NONE;
    }
    const out: Deployment[] = [];
    for (const deployment of deployments) if (this.admit(this.state(shared, deployment), now)) out.push(deployment);
    if (out.length < 2) return out;
    this.arrange(shared, out);
    if (stickyKey !== "" && this.options.strategy !== "priority") this.keepSticky(shared, out, stickyKey);
    return out;
  }

  started(provider: string, deployment: Deployment): void {
    const state = this.state(this.provider(provider), deployment);
    state.inFlight++;
    if (state.breaker === "half_open" && state.probeGivenAt > 0) state.probeStarted = true;
  }

  finished(provider: string, deployment: Deployment, outcome: AttemptOutcome): void {
    const state = this.state(this.provider(provider), deployment);
    const now = this.now();
    if (state.inFlight > 0) state.inFlight--;
    if (outcome.ok) {
      state.stats.recordLatency(outcome.latencyMs);
      this.succeeded(provider, deployment.name, state, now);
      return;
    }
    const errorClass = outcome.errorClass;
    if (errorClass !== undefined) state.stats.recordError(errorClass, now);
    if (outcome.retryAfterMs !== undefined && outcome.retryAfterMs > 0) {
      const until = now + Math.min(outcome.retryAfterMs, this.options.maxRetryAfterMs);
      if (until > state.waitUntil) {
        state.waitUntil = until;
        this.options.onTransition?.({ provider, deployment: deployment.name, waitUntil: until });
      }
    }
    if (errorClass !== undefined && BREAKER_FAILURES.has(errorClass)) {
      this.failed(provider, deployment.name, state, errorClass, now);
    } else if (state.breaker === "half_open") {
      // The probe said nothing about the deployment's health (a 429, a bad request): another may go.
      state.probeGivenAt = 0;
      state.probeStarted = false;
    }
  }

  nextAvailableAt(provider: string, deployments: readonly Deployment[]): number | undefined {
    const shared = this.provider(provider);
    const now = this.now();
    let earliest: number | undefined;
    for (const deployment of deployments) {
      const state = this.state(shared, deployment);
      let at = state.waitUntil;
      if (state.breaker === "open") at = Math.max(at, state.probeAt);
      else if (state.breaker === "half_open" && state.probeGivenAt > 0) at = Math.max(at, state.probeGivenAt + this.probeLeaseMs);
      if (at <= now) return undefined;
      if (earliest === undefined || at < earliest) earliest = at;
    }
    return earliest;
  }

  /** This instance's view of a deployment (admin listing); created on first sight. */
  inspect(provider: string, deployment: Deployment): DeploymentState {
    return this.state(this.provider(provider), deployment);
  }

  /**
   * Another instance's transition, applied to this one's memory. One for a deployment not asked for here yet is
   * kept until it is (the operators' configuration bounds how many there can be).
   */
  apply(transition: Transition): void {
    const state = this.providers.get(transition.provider)?.deployments.get(transition.deployment);
    if (state === undefined) {
      const key = transition.provider + "\u0000" + transition.deployment;
      const earlier = this.unseen.get(key);
      this.unseen.set(key, earlier === undefined ? transition : merged(earlier, transition));
      return;
    }
    this.applyTo(state, transition);
  }

  private applyTo(state: DeploymentState, transition: Transition): void {
    const { openUntil, waitUntil } = transition;
    if (waitUntil !== undefined && waitUntil > state.waitUntil) state.waitUntil = waitUntil;
    if (openUntil === undefined) return;
    if (openUntil === 0) {
      if (state.breaker !== "closed") this.close(state);
    } else if (state.breaker === "closed" || (state.breaker === "open" && openUntil > state.probeAt)) {
      this.open(state, openUntil);
    }
  }

  /** Whether a deployment may be tried now; hands out the half-open probe (once). */
  private admit(state: DeploymentState, now: number): boolean {
    if (state.waitUntil > now) return false;
    switch (state.breaker) {
      case "closed":
        return true;
      case "open":
        if (now < state.probeAt) return false;
        state.breaker = "half_open";
        state.probeGivenAt = now;
        state.probeStarted = false;
        return true;
      case "half_open":
        // One probe at a time; one handed out but never started (the request was answered elsewhere) lapses.
        if (state.probeGivenAt > 0 && (state.probeStarted || now - state.probeGivenAt < this.probeLeaseMs)) return false;
        state.probeGivenAt = now;
        state.probeStarted = false;
        return true;
    }
  }

  private succeeded(provider: string, name: string, state: DeploymentState, now: number): void {
    if (this.options.breaker.window_ms !== undefined) this.countAttempt(state, now);
    else state.failures = 0;
    if (state.breaker === "closed") return;
    this.close(state);
    this.options.onTransition?.({ provider, deployment: name, openUntil: 0 });
  }

  private failed(provider: string, name: string, state: DeploymentState, errorClass: ErrorClass, now: number): void {
    const breaker = this.options.breaker;
    if (breaker.window_ms !== undefined) this.countAttempt(state, now);
    state.failures++;
    const trips =
      state.breaker === "half_open" || // the probe failed
      errorClass === "auth" || // the key is bad: down at once
      (state.breaker === "closed" && state.failures >= breaker.failures && (breaker.failure_rate === undefined || state.failures / state.attempts >= breaker.failure_rate));
    if (!trips || state.breaker === "open") return;
    const openUntil = now + breaker.cooldown_ms;
    this.open(state, openUntil);
    this.options.onTransition?.({ provider, deployment: name, openUntil });
  }

  /** Window mode: attempts and failures of the current window (a new window starts them over). */
  private countAttempt(state: DeploymentState, now: number): void {
    if (now - state.windowStart >= this.options.breaker.window_ms!) {
      state.windowStart = now;
      state.attempts = 0;
      state.failures = 0;
    }
    state.attempts++;
  }

  private open(state: DeploymentState, probeAt: number): void {
    state.breaker = "open";
    state.probeAt = probeAt;
    state.probeGivenAt = 0;
    state.probeStarted = false;
  }

  private close(state: DeploymentState): void {
    state.breaker = "closed";
    state.failures = 0;
    state.attempts = 0;
    state.probeAt = 0;
    state.probeGivenAt = 0;
    state.probeStarted = false;
  }

  /** Puts the admitted deployments (at least two, in list order) in the strategy's order, in place. */
  private arrange(shared: ProviderState, out: Deployment[]): void {
    switch (this.options.strategy) {
      case "priority":
        return;
      case "round_robin": {
        const start = shared.turn++ % out.length;
        if (shared.turn >= Number.MAX_SAFE_INTEGER) shared.turn = 0;
        rotate(out, start);
        return;
      }
      case "least_in_flight": {
        // Insertion sort: stable (ties keep list order), no allocation, a handful of elements.
        for (let i = 1; i < out.length; i++) {
          const item = out[i]!;
          const load = this.state(shared, item).inFlight;
          let j = i - 1;
          while (j >= 0 && this.state(shared, out[j]!).inFlight > load) {
            out[j + 1] = out[j]!;
            j--;
          }
          out[j + 1] = item;
        }
        return;
      }
      case "weighted": {
        // The first by weight; the rest (fallbacks) in list order.
        let total = 0;
        for (const deployment of out) total += Math.max(0, deployment.weight);
        if (total <= 0) return;
        let pick = this.random() * total;
        let chosen = 0;
        for (let i = 0; i < out.length; i++) {
          pick -= Math.max(0, out[i]!.weight);
          if (pick < 0) {
            chosen = i;
            break;
          }
        }
        moveToFront(out, chosen);
        return;
      }
    }
  }

  /** The deployment this sticky key used last goes first while it is admitted; the first is remembered. */
  private keepSticky(shared: ProviderState, out: Deployment[], stickyKey: string): void {
    const sticky = shared.sticky;
    const last = sticky.get(stickyKey);
    if (last !== undefined) {
      for (let i = 0; i < out.length; i++) {
        if (out[i]!.name === last) {
          moveToFront(out, i);
          break;
        }
      }
      sticky.delete(stickyKey); // re-inserted below: most recently used
    } else if (sticky.size >= STICKY_ENTRIES) {
      sticky.delete(sticky.keys().next().value!);
    }
    sticky.set(stickyKey, out[0]!.name);
  }

  private provider(name: string): ProviderState {
    let shared = this.providers.get(name);
    if (shared === undefined) {
      shared = new ProviderState(name);
      this.providers.set(name, shared);
    }
    return shared;
  }

  private applyUnseen(shared: ProviderState, name: string, state: DeploymentState): void {
    const key = shared.name + "\u0000" + name;
    const pending = this.unseen.get(key);
    if (pending === undefined) return;
    this.unseen.delete(key);
    this.applyTo(state, pending);
  }

  private state(shared: ProviderState, deployment: Deployment): DeploymentState {
    let state = shared.deployments.get(deployment.name);
    if (state === undefined) {
      state = new DeploymentState(deployment);
      shared.deployments.set(deployment.name, state);
      if (this.unseen.size > 0) this.applyUnseen(shared, deployment.name, state);
    } else if (state.single[0] !== deployment) {
      state.single = Object.freeze([deployment]);
    }
    return state;
  }
}

/** Two transitions of one deployment as one: the later breaker state, the longer wait. */
function merged(earlier: Transition, later: Transition): Transition {
  return {
    provider: later.provider,
    deployment: later.deployment,
    openUntil: later.openUntil ?? earlier.openUntil,
    waitUntil: Math.max(earlier.waitUntil ?? 0, later.waitUntil ?? 0) || undefined,
  };
}

function moveToFront(items: Deployment[], index: number): void {
  const item = items[index]!;
  for (let i = index; i > 0; i--) items[i] = items[i - 1]!;
  items[0] = item;
}

/** Rotates left by `by` in place (three reversals: no allocation). */
function rotate(items: Deployment[], by: number): void {
  if (by === 0) return;
  reverse(items, 0, by - 1);
  reverse(items, by, items.length - 1);
  reverse(items, 0, items.length - 1);
}

function reverse(items: Deployment[], from: number, to: number): void {
  for (; from < to; from++, to--) {
    const item = items[from]!;
    items[from] = items[to]!;
    items[to] = item;
  }
}
