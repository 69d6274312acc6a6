import Redis from "ioredis";
import type { Logger } from "../../core/log.ts";
import { denial, PERIOD_MS, type Denial } from "./gcra.ts";
import type { Grant, LeasableStore } from "./leases.ts";
import { createSettleSummer } from "./settles.ts";
import { countersUnavailable } from "./limits.ts";

/**
 * The Lua twins of gcra.ts: `drained`, `waitFor`, `stateTtl`. One hash per API key:
 * r = request level, ra = its time, t = token level, ta = its time (levels in unit·ms, integers).
 * A script runs atomically in Redis, so every gateway instance reads and writes one count.
 */
const COMMON_LUA = `
local function drained(level, at, limit, now)
  level = tonumber(level) or 0
  at = tonumber(at) or now
  if now <= at then return level end
  level = level - (now - at) * limit
  if level > 0 then return level end
  return 0
end
local function later(at, now)
  at = tonumber(at)
  if at and at > now then return at end
  return now
end
local function int(n) return string.format('%.0f', n) end
local function keep(key, tokens, tpm, period)
  local ttl = period
  if tpm > 0 then
    local debt = math.ceil(tokens / tpm)
    if debt > ttl then ttl = debt end
  end
  ttl = ttl + 1000
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
`;

/**
 * ARGV: now, rpm, tpm (0 = none), tokens, period, requests, extra tokens. Admits one request costing `tokens`
 * and, when it fits, takes up to `requests` request units in all (a lease: at least this request's one) and up
 * to `extra` tokens beyond its own, as many as the windows have room for. Returns {request wait ms, token wait
 * ms, request units taken, extra tokens taken}; {0, 0, …} = admitted and charged. Without the last two ARGV
 * (or 1, 0) it is the plain admission of one request.
 */
const ADMIT_LUA = `${COMMON_LUA}
local now, rpm, tpm, tokens, period = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local want, extra = tonumber(ARGV[6]) or 1, tonumber(ARGV[7]) or 0
local s = redis.call('HMGET', KEYS[1], 'r', 'ra', 't', 'ta')
local r, t, rw, tw = 0, 0, 0, 0
if rpm > 0 then
  r = drained(s[1], s[2], rpm, now)
  local excess = r + (1 - rpm) * period
  if excess > 0 then rw = math.ceil(excess / rpm) end
end
if tpm > 0 then
  t = drained(s[3], s[4], tpm, now)
  local excess = t + (tokens - tpm) * period
  if excess > 0 then tw = math.ceil(excess / tpm) end
end
if rw > 0 or tw > 0 then return {rw, tw, 0, 0} end
local k, x = 1, 0
if rpm > 0 then
  if want > 1 then
    local room = math.floor((rpm * period - r) / period)
    if room < want then k = room else k = want end
    if k < 1 then k = 1 end
  end
  redis.call('HSET', KEYS[1], 'r', int(r + k * period), 'ra', int(later(s[2], now)))
end
if tpm > 0 then
  if extra > 0 then
    local room = math.floor((tpm * period - t) / period) - tokens
    if room < extra then x = room else x = extra end
    if x < 0 then x = 0 end
  end
  t = t + (tokens + x) * period
  redis.call('HSET', KEYS[1], 't', int(t), 'ta', int(later(s[4], now)))
end
keep(KEYS[1], t, tpm, period)
return {0, 0, k, x}
`;

/**
 * ARGV: now, tpm, tokens (negative: given back), period, rpm, requests (negative: request units given back).
 * A window never drops below zero, and one that does not exist gets nothing given back.
 */
const ADJUST_LUA = `${COMMON_LUA}
local now, tpm, tokens, period = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local rpm, requests = tonumber(ARGV[5]) or 0, tonumber(ARGV[6]) or 0
local s = redis.call('HMGET', KEYS[1], 't', 'ta', 'r', 'ra')
local t, wrote = 0, false
if rpm > 0 and requests ~= 0 and (s[3] or requests > 0) then
  local r = drained(s[3], s[4], rpm, now) + requests * period
  if r < 0 then r = 0 end
  redis.call('HSET', KEYS[1], 'r', int(r), 'ra', int(later(s[4], now)))
  wrote = true
end
if tokens ~= 0 and (s[1] or tokens > 0) then
  t = drained(s[1], s[2], tpm, now) + tokens * period
  if t < 0 then t = 0 end
  redis.call('HSET', KEYS[1], 't', int(t), 'ta', int(later(s[2], now)))
  wrote = true
end
if wrote then keep(KEYS[1], t, tpm, period) end
return 0
`;

interface ScriptedRedis extends Redis {
  rateLimitAdmit(key: string, now: number, rpm: number, tpm: number, tokens: number, period: number, requests?: number, extra?: number): Promise<[number, number, number, number]>;
  rateLimitAdjust(key: string, now: number, tpm: number, tokens: number, period: number, rpm?: number, requests?: number): Promise<number>;
}

export interface RedisStoreOptions {
  url: string;
  keyPrefix: string;
  commandTimeoutMs: number;
  log: Logger;
}

/**
 * Windows in Redis, shared by every gateway instance. Fails closed and fast: no offline queue, a
 * command timeout and one retry, so a lost Redis turns requests into 503 at once instead of hanging
 * them; ioredis keeps reconnecting in the background and the next request after it is back is served.
 */
export async function createRedisStore(options: RedisStoreOptions): Promise<LeasableStore & { readonly redis: Redis }> {
  const connectTimeout = Math.max(1_000, options.commandTimeoutMs * 2);
  const redis = new Redis(options.url, {
    keyPrefix: options.keyPrefix,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: options.commandTimeoutMs,
    connectTimeout,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1_000),
    connectionName: "gateway-rate-limit",
    // The scripts of one event-loop turn go out in one write: one round trip for a turn's requests (docs/performance.md).
    enableAutoPipelining: true,
  }) as ScriptedRedis;
  redis.defineCommand("rateLimitAdmit", { numberOfKeys: 1, lua: ADMIT_LUA });
  redis.defineCommand("rateLimitAdjust", { numberOfKeys: 1, lua: ADJUST_LUA });

  const where = redisAddress(options.url);
  let reachable: boolean | undefined;
  redis.on("ready", function redisReady() {
    if (reachable === false) options.log.info("redis reachable again", { redis: where });
    reachable = true;
  });
  redis.on("error", function redisError(error: Error) {
    // One line per outage: ioredis reports every failed reconnection attempt.
    if (reachable !== false) options.log.error("redis unreachable: rate-limited requests answer 503 until it is back", { redis: where, error: error.message });
    reachable = false;
  });

  // Give the first connection a moment so the first requests are not refused while it opens.
  await new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      redis.off("ready", done);
      redis.off("error", done);
      resolve();
    };
    const timer = setTimeout(done, connectTimeout);
    redis.once("ready", done);
    redis.once("error", done);
  });

  // Settles summed per key, one command per key (settles.ts).
  const settles = createSettleSummer((due) =>
    Promise.all(
      due.map(({ key, tpm, tokens, now }) =>
        tokens === 0 ? undefined : redis.rateLimitAdjust(key, Math.floor(now), tpm, tokens, PERIOD_MS).then(ignore, countersUnavailable),
      ),
    ).then(ignore),
  );

  return {
    redis,
    admit(key: string, rpm: number, tpm: number, tokens: number, now: number): Promise<Denial | null> {
      settles.sendKey(key);
      return redis.rateLimitAdmit(key, Math.floor(now), rpm, tpm, tokens, PERIOD_MS).then(toDenial, countersUnavailable);
    },
    take(key: string, rpm: number, tpm: number, tokens: number, requests: number, extraTokens: number, now: number): Promise<Grant> {
      settles.sendKey(key);
      return redis.rateLimitAdmit(key, Math.floor(now), rpm, tpm, tokens, PERIOD_MS, requests, extraTokens).then(toGrant, countersUnavailable);
    },
    giveBack(key: string, rpm: number, tpm: number, requests: number, tokens: number, now: number): Promise<void> {
      if (requests <= 0 && tokens <= 0) return Promise.resolve();
      return redis.rateLimitAdjust(key, Math.floor(now), tpm, -tokens, PERIOD_MS, rpm, -requests).then(ignore, countersUnavailable);
    },
    adjust(key: string, tpm: number, tokens: number, now: number): Promise<void> {
      return settles.add(key, tpm, tokens, now);
    },
    async close() {
      // Settles still summing go out first, and are answered before QUIT (auto-pipelined commands leave a tick late).
      await settles.flush(connectTimeout);
      await Promise.race([redis.quit().catch(ignore), Bun.sleep(connectTimeout)]);
      redis.disconnect();
    },
  };
}

function toDenial(waits: [number, number, number, number]): Denial | null {
  return denial(Number(waits[0]), Number(waits[1]));
}

function toGrant(answer: [number, number, number, number]): Grant {
  return { denial: denial(Number(answer[0]), Number(answer[1])), requests: Number(answer[2]), tokens: Number(answer[3]) };
}

function ignore(): void {}

/** host:port of a Redis URL, without credentials, for logs. */
function redisAddress(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || "6379"}`;
  } catch {
    return "(unparsable redis url)";
  }
}
