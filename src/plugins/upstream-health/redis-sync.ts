import Redis from "ioredis";
import type { Logger } from "../../core/log.ts";
import type { HealthKeeper, Transition } from "./keeper.ts";

export interface RedisSyncOptions {
  url: string;
  keyPrefix: string;
  log: Logger;
  now: () => number;
}

/** What travels on the channel: a transition and the instance that made it. */
interface Message extends Transition {
  from: string;
}

/** A hash outlives the state it records by this long (then Redis drops it). */
const KEEP_MS = 60_000;

/**
 * Shares breaker transitions and Retry-After waits among instances: each one made here is written to a hash per
 * deployment (`<prefix>d:<provider>:<deployment>`: open_until, wait_until) and published on `<prefix>transitions`;
 * the others' messages are applied to the local keeper as they arrive. Nothing here is on a request's path:
 * order() reads local memory only. Redis down: every instance keeps its own health, one log line per outage.
 */
export class RedisSync {
  private readonly id = crypto.randomUUID();
  private readonly channel: string;
  private readonly redis: Redis;
  private readonly subscriber: Redis;
  private reachable: boolean | undefined;

  constructor(
    private readonly keeper: HealthKeeper,
    private readonly options: RedisSyncOptions,
  ) {
    this.channel = `${options.keyPrefix}transitions`;
    const settings = {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      commandTimeout: 1_000,
      connectTimeout: 2_000,
      retryStrategy: (attempt: number) => Math.min(attempt * 200, 2_000),
      lazyConnect: true,
    };
    this.redis = new Redis(options.url, { ...settings, connectionName: "gateway-upstream-health" });
    this.subscriber = new Redis(options.url, { ...settings, connectionName: "gateway-upstream-health-sub", enableOfflineQueue: true });
    for (const connection of [this.redis, this.subscriber]) {
      connection.on("error", (error: Error) => this.unreachable(error));
      connection.on("ready", () => this.ready());
    }
    this.subscriber.on("message", (channel: string, text: string) => {
      if (channel === this.channel) this.received(text);
    });
  }

  /** Connects and subscribes; resolves even when Redis cannot be reached (local health only until it can). */
  async start(): Promise<void> {
    await Promise.allSettled([this.redis.connect(), this.subscriber.connect()]);
    // Subscriptions are renewed by ioredis after a reconnection (autoResubscribe).
    const subscribed = this.subscriber.subscribe(this.channel).catch((error: Error) => this.unreachable(error));
    await Promise.race([subscribed, Bun.sleep(2_000)]); // Redis down: subscribed once it is back
    await Promise.race([this.loadStored().catch((error: Error) => this.unreachable(error)), Bun.sleep(2_000)]);
  }

  /** What other instances stored before this one started (open breakers, waits): a new instance starts informed. */
  private async loadStored(): Promise<void> {
    const prefix = `${this.options.keyPrefix}d:`;
    let cursor = "0";
    do {
      const [next, keys] = await this.redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 100);
      cursor = next;
      for (const key of keys) {
        const [provider, ...rest] = key.slice(prefix.length).split(":");
        const fields = await this.redis.hgetall(key);
        if (!provider || rest.length === 0) continue;
        const openUntil = fields.open_until === undefined ? undefined : Number(fields.open_until);
        const waitUntil = fields.wait_until === undefined ? undefined : Number(fields.wait_until);
        this.keeper.apply({ provider, deployment: rest.join(":"), openUntil, waitUntil });
      }
    } while (cursor !== "0");
  }

  /** A transition made here: written and published in the background. */
  publish(transition: Transition): void {
    const key = `${this.options.keyPrefix}d:${transition.provider}:${transition.deployment}`;
    const fields: string[] = [];
    if (transition.openUntil !== undefined) fields.push("open_until", String(transition.openUntil));
    if (transition.waitUntil !== undefined) fields.push("wait_until", String(transition.waitUntil));
    const lasts = Math.max(transition.openUntil ?? 0, transition.waitUntil ?? 0) - this.options.now();
    const message: Message = { ...transition, from: this.id };
    this.redis
      .multi()
      .hset(key, ...fields)
      .pexpire(key, Math.max(lasts, 0) + KEEP_MS)
      .publish(this.channel, JSON.stringify(message))
      .exec()
      .catch((error: Error) => this.unreachable(error));
  }

  async close(): Promise<void> {
    for (const connection of [this.subscriber, this.redis]) {
      await Promise.race([connection.quit().catch(() => {}), Bun.sleep(1_000)]);
      connection.disconnect();
    }
  }

  private received(text: string): void {
    let message: Message;
    try {
      message = JSON.parse(text) as Message;
    } catch {
      return;
    }
    if (message.from === this.id || typeof message.provider !== "string" || typeof message.deployment !== "string") return;
    this.keeper.apply({ provider: message.provider, deployment: message.deployment, openUntil: message.openUntil, waitUntil: message.waitUntil });
  }

  private unreachable(error: Error): void {
    // One line per outage: ioredis reports every failed reconnection attempt.
    if (this.reachable !== false) {
      this.options.log.warn("redis unreachable: upstream health is kept per instance until it is back", { error: error.message });
    }
    this.reachable = false;
  }

  private ready(): void {
    if (this.reachable === false) this.options.log.info("redis reachable again: upstream health is shared");
    this.reachable = true;
  }
}
