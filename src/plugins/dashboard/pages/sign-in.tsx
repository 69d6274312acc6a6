import { InvalidRequestError } from "../../../core/errors.ts";
import { RecordConflictError } from "../../storage/errors.ts";
import { newUser, normalizeEmail, verifyAgainstNothing, verifyPassword } from "../../auth/users.ts";
import { HIDDEN, type DashboardDeps, type PageModule } from "../deps.ts";
import { preSessionAccepted, signedIn } from "../pre-session.ts";
import { preSessionPage } from "../pre-session-page.tsx";
import { field, redirect } from "../web.ts";

/** Sign in, sign out and (when the config allows it) sign up: the pages before a session exists. */
export const signInPages: PageModule = (app, deps) => {
  const { sessions } = deps;

  function signInForm(request: Request, notice?: { status: number; text: string }, email = ""): Promise<Response> {
    return preSessionPage(request, deps.config.secure_cookie, {
      title: "Sign in",
      action: "/dashboard/sign-in",
      submit: "Sign in",
      notice,
      fields: (
        <>
          <label>
            Email
            <input type="email" name="email" autocomplete="username" required value={email} />
          </label>
          <label>
            Password
            <input type="password" name="password" autocomplete="current-password" required />
          </label>
        </>
      ),
      after: (
        <>
          {deps.config.signup ? (
            <p>
              No account yet? <a href="/dashboard/sign-up">Create an account</a>
            </p>
          ) : (
            ""
          )}
          <p class="muted">
            Operators: <a href="/dashboard/admin/sign-in">sign in with the admin token</a>.
          </p>
        </>
      ),
    });
  }

  app
    .get("/", () => redirect("/dashboard"), HIDDEN)
    .get(
      "/dashboard",
      async ({ request }) => redirect((await sessions.viewer(request).catch(() => null))?.kind === "operator" ? "/dashboard/admin" : "/dashboard/keys"),
      HIDDEN,
    )
    .get(
      "/dashboard/sign-in",
      async ({ request }) => ((await sessions.viewer(request).catch(() => null)) ? redirect("/dashboard") : signInForm(request)),
      HIDDEN,
    )
    .post(
      "/dashboard/sign-in",
      async ({ request, body }) => {
        const form = body as Record<string, unknown> | undefined;
        const rawEmail = field(form, "email").slice(0, 320);
        const password = typeof form?.password === "string" ? form.password : "";
        if (!preSessionAccepted(request, form)) {
          return signInForm(request, { status: 403, text: "This form has expired or came from another site. Try again." }, rawEmail);
        }
        const email = rawEmail.toLowerCase();
        const wait = await deps.counters.admitSignIn("users", deps.gateway.clientIp(request), email);
        if (wait > 0) {
          const minutes = Math.ceil(wait / 60);
          const response = await signInForm(request, { status: 429, text: `Too many sign-in attempts. Try again in ${minutes} minute${minutes === 1 ? "" : "s"}.` }, rawEmail);
          response.headers.set("retry-after", String(wait));
          return response;
        }
        const user = await findUser(deps, rawEmail);
        // An unknown email costs the same hash as a wrong password: the answer's timing tells nothing.
        const ok = user ? await verifyPassword(password, user.passwordHash) : await verifyAgainstNothing(password);
        if (!user || !ok) {
          deps.counters.failedSignIn("users", email);
          deps.log.info("dashboard sign-in refused", { ip: deps.gateway.clientIp(request) });
          return signInForm(request, { status: 401, text: "Wrong email or password." }, rawEmail);
        }
        return signedIn(sessions, request, user.id, "/dashboard/keys", deps.config.secure_cookie);
      },
      HIDDEN,
    )
    .post(
      "/dashboard/sign-out",
      ({ request, body }) =>
        deps.userAction(request, body as Record<string, unknown>, async () => redirect("/dashboard/sign-in", { "set-cookie": await sessions.revoke(request) })),
      HIDDEN,
    );

  if (!deps.config.signup) return;

  function signUpForm(request: Request, notice?: { status: number; text: string }, values = { name: "", email: "" }): Promise<Response> {
    return preSessionPage(request, deps.config.secure_cookie, {
      title: "Create an account",
      action: "/dashboard/sign-up",
      submit: "Create account",
      notice,
      fields: (
        <>
          <label>
            Account name
            <input name="name" required maxlength="200" value={values.name} />
          </label>
          <label>
            Email
            <input type="email" name="email" autocomplete="username" required value={values.email} />
          </label>
          <label>
            Password
            <input type="password" name="password" autocomplete="new-password" required minlength="10" />
          </label>
        </>
      ),
      after: <p class="muted">The account starts with a zero balance.</p>,
    });
  }

  app
    .get("/dashboard/sign-up", ({ request }) => signUpForm(request), HIDDEN)
    .post(
      "/dashboard/sign-up",
      async ({ request, body }) => {
        const form = body as Record<string, unknown> | undefined;
        const values = { name: field(form, "name").slice(0, 200), email: field(form, "email").slice(0, 320) };
        const password = typeof form?.password === "string" ? form.password : "";
        if (!preSessionAccepted(request, form)) {
          return signUpForm(request, { status: 403, text: "This form has expired or came from another site. Try again." }, values);
        }
        const wait = await deps.counters.admitSignIn("users", deps.gateway.clientIp(request), "sign-up");
        if (wait > 0) return signUpForm(request, { status: 429, text: "Too many attempts from your address. Try again later." }, values);
        if (values.name === "") return signUpForm(request, { status: 400, text: "Give the account a name." }, values);
        let created;
        try {
          const email = normalizeEmail(values.email);
          const pending = await newUser({ accountId: "", email, password, role: "owner" });
          if (await deps.store.findUserByEmail(email)) throw new RecordConflictError("email taken");
          const account = await deps.store.createAccount(values.name);
          created = await deps.store.createUser({ ...pending, accountId: account.id });
        } catch (error) {
          if (error instanceof InvalidRequestError) return signUpForm(request, { status: 400, text: error.message }, values);
          if (error instanceof RecordConflictError) return signUpForm(request, { status: 409, text: "An account with this email exists: sign in instead." }, values);
          throw error;
        }
        return signedIn(sessions, request, created.id, "/dashboard/keys", deps.config.secure_cookie);
      },
      HIDDEN,
    );
};

async function findUser(deps: DashboardDeps, rawEmail: string) {
  try {
    return await deps.store.findUserByEmail(normalizeEmail(rawEmail));
  } catch (error) {
    if (error instanceof InvalidRequestError) return null; // not an email: no such user
    throw error;
  }
}
