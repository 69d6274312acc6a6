import type { AnyElysia } from "elysia";
import { GatewayError, UnavailableError } from "../../core/errors.ts";
import type { Logger } from "../../core/log.ts";
import type { Gateway } from "../../core/plugin.ts";
import type { AdminService } from "../admin/index.ts";
import type { AuthService } from "../auth/principal.ts";
import type { BudgetService } from "../budget/index.ts";
import type { Catalog } from "../catalog/catalog.ts";
import type { PaymentsService } from "../payments/processor.ts";
import type { Repository, UserRole } from "../storage/repository.ts";
import { Layout, Notice } from "./layout.tsx";
import type { DashboardCounters } from "./counters.ts";
import type { DashboardConfig } from "./schema.ts";
import { csrfAccepted, type Sessions, type Viewer } from "./session.ts";
import { html, redirect } from "./web.ts";

export type UserViewer = Extract<Viewer, { kind: "user" }>;
export type OperatorViewer = Extract<Viewer, { kind: "operator" }>;
export type Form = Record<string, unknown> | undefined;

/** Routes of the dashboard stay out of the API docs. */
export const HIDDEN = { detail: { hide: true } } as const;

/** What every page module of the dashboard is given. */
export interface DashboardDeps {
  config: DashboardConfig;
  store: Repository;
  auth: AuthService;
  catalog: Catalog | undefined;
  /** Plans and funds (the budget plugin), when it runs. */
  budget: BudgetService | undefined;
  /** Top-ups (the payments plugin), when it runs; its methods() is empty when no processor is configured. */
  payments: PaymentsService | undefined;
  /** The admin token check for operators' sign-in, when the admin plugin runs. */
  admin: AdminService | undefined;
  gateway: Gateway;
  sessions: Sessions;
  /** Sign-in limits and the route proofs' hourly cap, one per host (counters.ts). */
  counters: DashboardCounters;
  log: Logger;
  now: () => number;
  /** A GET page for a signed-in user of an account; without a session: to the sign-in page. */
  userPage(request: Request, render: (viewer: UserViewer) => Promise<Response>): Promise<Response>;
  /** A POST of a signed-in user: the CSRF token checked, the role required (default: any role) before `act`. */
  userAction(request: Request, form: Form, act: (viewer: UserViewer, form: Form) => Promise<Response>, role?: UserRole): Promise<Response>;
  /** The same two for operators (signed in with the admin token at /dashboard/admin/sign-in). */
  operatorPage(request: Request, render: (viewer: OperatorViewer) => Promise<Response>): Promise<Response>;
  operatorAction(request: Request, form: Form, act: (viewer: OperatorViewer, form: Form) => Promise<Response>): Promise<Response>;
}

export type PageModule = (app: AnyElysia, deps: DashboardDeps) => void;

/** The guards of DashboardDeps: session, role, CSRF; a failure inside a page becomes an HTML error page, never a stack. */
export function createGuards(sessions: Sessions, log: Logger): Pick<DashboardDeps, "userPage" | "userAction" | "operatorPage" | "operatorAction"> {
  async function guarded<V extends Viewer>(
    request: Request,
    kind: V["kind"],
    run: (viewer: V) => Promise<Response>,
  ): Promise<Response> {
    let viewer: Viewer | null = null;
    try {
      viewer = await sessions.viewer(request);
      if (viewer?.kind !== kind) return redirect(kind === "operator" ? "/dashboard/admin/sign-in" : "/dashboard/sign-in");
      return await run(viewer as V);
    } catch (error) {
      return errorPage(error, viewer ?? undefined, log);
    }
  }

  function refused(viewer: Viewer, status: number, text: string): Promise<Response> {
    return html(
      Layout({ title: status === 403 ? "Not allowed" : "Refused", viewer, children: Notice({ kind: "error", text }) }),
      { status },
    );
  }

  return {
    userPage: (request, render) => guarded<UserViewer>(request, "user", render),
    userAction: (request, form, act, role) =>
      guarded<UserViewer>(request, "user", (viewer) => {
        if (!csrfAccepted(request, viewer.csrf, form)) return refused(viewer, 403, "This form has expired or came from another site (CSRF check). Reload the page and try again.");
        if (role && viewer.user.role !== role) return refused(viewer, 403, `Only an account ${role} can do this.`);
        return act(viewer, form);
      }),
    operatorPage: (request, render) => guarded<OperatorViewer>(request, "operator", render),
    operatorAction: (request, form, act) =>
      guarded<OperatorViewer>(request, "operator", (viewer) => {
        if (!csrfAccepted(request, viewer.csrf, form)) return refused(viewer, 403, "This form has expired or came from another site (CSRF check). Reload the page and try again.");
        return act(viewer, form);
      }),
  };
}

/** A failure as a page: a GatewayError's own status and message; anything else a logged 500 (503 when the store is down). */
export function errorPage(error: unknown, viewer: Viewer | undefined, log: Logger): Promise<Response> {
  let status = 500;
  let text = "Something went wrong on our side. Try again in a moment.";
  if (error instanceof GatewayError) {
    status = error.status;
    text = error.message;
  } else {
    log.error("dashboard page failed", { error: String((error as Error)?.stack ?? error) });
  }
  if (error instanceof UnavailableError) text = "Account data is briefly unavailable. Try again in a few seconds.";
  return html(Layout({ title: status >= 500 ? "Unavailable" : "Cannot do that", viewer, children: Notice({ kind: "error", text }) }), { status });
}
