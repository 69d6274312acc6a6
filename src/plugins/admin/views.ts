import { nanoToUsd } from "../../core/money.ts";
import type { Account, ApiKey, Generation, User } from "../storage/repository.ts";
import { answeringDeployment } from "../storage/rows.ts";

/** The admin API's JSON shapes of stored rows: times as RFC 3339, money as USD numbers, never a key's hash. */

export function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

export function accountView(account: Account) {
  return { id: account.id, name: account.name, created_at: iso(account.createdAt) };
}

/** A key as created: its masked label ("sk-gw-Ab3d…x9Yz"), never the key or its hash. */
export function keyView(key: ApiKey) {
  return {
    id: key.id,
    account_id: key.accountId,
    name: key.name,
    label: key.label,
    limit: key.limit === null ? null : nanoToUsd(key.limit),
    models: key.models,
    rate_limit: { requests_per_minute: key.requestsPerMinute, tokens_per_minute: key.tokensPerMinute },
    expires_at: iso(key.expiresAt),
    created_at: iso(key.createdAt),
  };
}

/** A key in a list: as created, plus whether it was revoked (deleted_at) or blocked. */
export function listedKeyView(key: ApiKey) {
  return { ...keyView(key), deleted_at: iso(key.deletedAt), blocked: key.blocked };
}

/** A dashboard user: never its password hash. */
export function userView(user: User) {
  return { id: user.id, email: user.email, role: user.role, account_id: user.accountId, created_at: iso(user.createdAt) };
}

export function requestRow(row: Generation) {
  return {
    id: row.id,
    created_at: iso(row.createdAt),
    key_id: row.keyId,
    model: row.model,
    /** The model the client asked for: `model` unless the request fell back to another. */
    requested_model: row.requestedModel ?? row.model,
    status: row.status,
    error_code: row.errorCode,
    prompt_tokens: row.promptTokens,
    completion_tokens: row.completionTokens,
    cached_tokens: row.cachedTokens,
    cache_write_tokens: row.cacheWriteTokens,
    reasoning_tokens: row.reasoningTokens,
    cost: nanoToUsd(row.totalCost),
    latency_ms: row.latencyMs,
    deployment: answeringDeployment(row.attempts),
    attempts: row.attempts ?? [],
  };
}
