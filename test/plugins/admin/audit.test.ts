import { describe, expect, it } from "bun:test";
import { createLogger } from "../../../src/core/log.ts";
import { createAudit } from "../../../src/plugins/admin/audit.ts";

/** An audit writer on a real logger whose lines are kept. */
function audited() {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger("admin", { silent: false, sink: (line) => void lines.push(JSON.parse(line)) });
  return { audit: createAudit(log, "ab".repeat(32)), lines };
}

const request = (method = "GET") => new Request("http://gateway/admin/v1/x", { method });

describe("admin audit", () => {
  it("writes who, what and the status of a routed admin call", () => {
    const { audit, lines } = audited();
    audit.answered({ request: request("POST"), route: "/admin/v1/accounts", params: undefined, status: 201 });
    expect(lines[0]).toMatchObject({ message: "audit", action: "account.create", status: 201, actor: "admin", actor_fingerprint: "sha256:abababab" });
  });

  it("names another plugin's unlisted admin route by its last word and method, and skips routes outside /admin/", () => {
    const { audit, lines } = audited();
    audit.answered({ request: request("PUT"), route: "/admin/v1/accounts/:id/limits", params: { id: "acct_1" }, status: 200 });
    audit.answered({ request: request(), route: "/v1/models", params: undefined, status: 200 });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ action: "limits.put", account_id: "acct_1", status: 200 });
  });

  it("takes the status it is told, and the targets a handler noted for that request only", () => {
    const { audit, lines } = audited();
    const first = request("POST");
    audit.note(first, { reference: "inv-1" });
    audit.answered({ request: first, route: "/admin/v1/accounts/:id/credits", params: { id: "acct_1" }, status: 409 });
    audit.answered({ request: request("POST"), route: "/admin/v1/accounts/:id/credits", params: { id: "acct_2" }, status: 201 });
    expect(lines.map((line) => [line.account_id, line.reference, line.status])).toEqual([
      ["acct_1", "inv-1", 409],
      ["acct_2", undefined, 201],
    ]);
  });
});
