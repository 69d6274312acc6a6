import type { Children } from "@kitajs/html";
import { CsrfField, Layout, Notice } from "./layout.tsx";
import { preSession } from "./pre-session.ts";
import type { DashboardConfig } from "./schema.ts";
import { html } from "./web.ts";

/** What a form shown before any session (user sign-in, sign-up, operator sign-in) is made of. */
export interface PreSessionForm {
  title: string;
  action: string;
  /** The submit button's name. */
  submit: string;
  /** The fields, between the CSRF field and the button. */
  fields: Children;
  /** What follows the form (links to the other sign-in pages). */
  after?: Children;
  /** A refusal to show above the form, with the answer's status. */
  notice?: { status: number; text: string };
}

/** The page of a pre-session form: its login-CSRF token in a hidden field, and the cookie the token is checked against when new. */
export async function preSessionPage(request: Request, secureCookie: DashboardConfig["secure_cookie"], form: PreSessionForm): Promise<Response> {
  const pre = preSession(request, secureCookie);
  return html(
    <Layout title={form.title}>
      {form.notice ? <Notice kind="error" text={form.notice.text} /> : ""}
      <form method="post" action={form.action} class="stack">
        <CsrfField token={pre.token} />
        {form.fields}
        <button type="submit">{form.submit}</button>
      </form>
      {form.after ?? ""}
    </Layout>,
    { status: form.notice?.status ?? 200, headers: pre.cookie ? { "set-cookie": pre.cookie } : {} },
  );
}
