import type { Children } from "@kitajs/html";
import type { Viewer } from "./session.ts";
import { CSRF_FIELD, CSRF_HEADER } from "./session.ts";
import { ASSETS } from "./assets.ts";

export type Section = "keys" | "logs" | "usage" | "billing" | "route-proof" | "accounts";

const ACCOUNT_NAV: readonly [Section, string, string][] = [
  ["keys", "Keys", "/dashboard/keys"],
  ["logs", "Logs", "/dashboard/logs"],
  ["usage", "Usage", "/dashboard/usage"],
  ["billing", "Billing", "/dashboard/billing"],
  ["route-proof", "Route proof", "/dashboard/route-proof"],
];
const OPERATOR_NAV: readonly [Section, string, string][] = [["accounts", "Accounts", "/dashboard/admin"]];

/** The page around every dashboard view: head, navigation (when signed in), the main content. */
export function Layout(props: { title: string; viewer?: Viewer; active?: Section; children?: Children }): JSX.Element {
  const { viewer } = props;
  const nav = viewer === undefined ? [] : viewer.kind === "operator" ? OPERATOR_NAV : ACCOUNT_NAV;
  return (
    <>
      {"<!doctype html>"}
      <html lang="en">
        <head>
          <meta charset="utf-8" />
          <meta name="viewport" content="width=device-width, initial-scale=1" />
          <meta name="htmx-config" content='{"includeIndicatorStyles":false,"allowEval":false,"selfRequestsOnly":true}' />
          <title safe>{props.title + " · AI Gateway"}</title>
          <link rel="stylesheet" href={ASSETS.css} />
          <script src={ASSETS.htmx} defer></script>
          <script src={ASSETS.js} defer></script>
        </head>
        <body hx-headers={viewer ? JSON.stringify({ [CSRF_HEADER]: viewer.csrf }) : undefined}>
          <header class="top">
            <a class="brand" href="/dashboard">
              AI Gateway
            </a>
            {viewer?.kind === "user" ? (
              <span class="who" safe>
                {`${viewer.user.email} · ${viewer.account.name}`}
              </span>
            ) : viewer?.kind === "operator" ? (
              <span class="who">Operator</span>
            ) : (
              ""
            )}
            {nav.length > 0 ? (
              <nav aria-label="Main">
                {nav.map(([section, label, href]) => (
                  <a href={href} aria-current={section === props.active ? "page" : undefined}>
                    {label}
                  </a>
                ))}
                <form method="post" action={viewer?.kind === "operator" ? "/dashboard/admin/sign-out" : "/dashboard/sign-out"} class="inline">
                  <CsrfField viewer={viewer} />
                  <button type="submit" class="link">
                    Sign out
                  </button>
                </form>
              </nav>
            ) : (
              ""
            )}
          </header>
          <main>
            <h1 safe>{props.title}</h1>
            {props.children}
          </main>
        </body>
      </html>
    </>
  );
}

/** The hidden CSRF field every state-changing form carries. */
export function CsrfField(props: { viewer?: Viewer; token?: string }): JSX.Element {
  const token = props.token ?? props.viewer?.csrf;
  return token ? <input type="hidden" name={CSRF_FIELD} value={token} /> : "";
}

/** A notice above a page's content (the text is escaped). */
export function Notice(props: { kind: "error" | "ok"; text: string }): JSX.Element {
  return (
    <p class={`notice ${props.kind}`} role={props.kind === "error" ? "alert" : "status"} safe>
      {props.text}
    </p>
  );
}
