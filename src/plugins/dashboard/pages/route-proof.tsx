import { InvalidRequestError } from "../../../core/errors.ts";
import { HIDDEN, type PageModule, type UserViewer } from "../deps.ts";
import { CsrfField, Layout, Notice } from "../layout.tsx";
import { createRouteProof, type ProofResult, type ProofState, type RouteProof } from "../route-proof.ts";
import { field, html, redirect, usd } from "../web.ts";

const PATH = "/dashboard/route-proof";

/** The route proof page: run the fixed prompt once through a chosen model, paid by the house. */
export const routeProofPages: PageModule = (app, deps) => {
  const proofs = createRouteProof(deps);

  app
    .get(PATH, ({ request }) => deps.userPage(request, async (viewer) => page(viewer, proofs, await proofs.state(viewer.account.id))), HIDDEN)
    .post(
      PATH,
      ({ request, body }) =>
        deps.userAction(request, body as Record<string, unknown> | undefined, async (viewer, form) => {
          const model = field(form, "model");
          let outcome;
          try {
            outcome = await proofs.run(viewer.account.id, model);
          } catch (error) {
            if (error instanceof InvalidRequestError) {
              return page(viewer, proofs, { state: "none" }, { status: 400, text: error.message });
            }
            throw error;
          }
          if (outcome.kind === "done") return redirect(PATH);
          if (outcome.kind === "already") {
            const text =
              outcome.state.state === "done"
                ? "This account's route proof has already been run: it can be run once. Nothing was sent."
                : "This account's route proof is running right now: it can be run once. Nothing more was sent.";
            return page(viewer, proofs, outcome.state, { status: 409, text });
          }
          const status = outcome.status >= 400 && outcome.status <= 599 ? outcome.status : 502;
          return page(viewer, proofs, { state: "none" }, {
            status,
            text: `The route proof got no answer (${outcome.status}: ${outcome.message}). Nothing was counted for this account: you can try again.`,
          });
        }),
      HIDDEN,
    );
};

function page(viewer: UserViewer, proofs: RouteProof, state: ProofState, notice?: { status: number; text: string }): Promise<Response> {
  return html(
    <Layout title="Route proof" viewer={viewer} active="route-proof">
      <p>
        Send one fixed prompt through a model of your choice and see the live answer: no key, card or balance needed, the house pays, and
        each account can run it once.
      </p>
      {notice ? <Notice kind="error" text={notice.text} /> : ""}
      {state.state === "done" ? (
        <Result result={state.result} />
      ) : state.state === "running" ? (
        <p class="notice" role="status">
          This account's route proof is running. Reload the page in a moment to see its answer.
        </p>
      ) : (
        <ProofForm viewer={viewer} models={proofs.models()} prompt={proofs.prompt} />
      )}
    </Layout>,
    { status: notice?.status ?? 200 },
  );
}

function ProofForm(props: { viewer: UserViewer; models: string[]; prompt: string }): JSX.Element {
  return (
    <>
      <h2>The prompt</h2>
      <blockquote class="prompt" safe>
        {props.prompt}
      </blockquote>
      {props.models.length === 0 ? (
        <Notice kind="error" text="No model is offered for the route proof on this gateway." />
      ) : (
        <form method="post" action={PATH} class="stack">
          <CsrfField viewer={props.viewer} />
          <label>
            Model
            <select name="model" required>
              {props.models.map((id) => (
                <option value={id} safe>
                  {id}
                </option>
              ))}
            </select>
          </label>
          <button type="submit">Run route proof</button>
        </form>
      )}
    </>
  );
}

function Result(props: { result: ProofResult }): JSX.Element {
  const { result } = props;
  return (
    <>
      <h2>The prompt</h2>
      <blockquote class="prompt" safe>
        {result.prompt ?? ""}
      </blockquote>
      <h2>Result</h2>
      <dl class="facts">
        <dt>Model</dt>
        <dd safe>{result.model}</dd>
        <dt>Latency</dt>
        <dd>{`${result.latency_ms} ms`}</dd>
        <dt>Answer</dt>
        <dd class="answer" safe>
          {result.answer === "" ? "(no text in the answer)" : result.answer}
        </dd>
        <dt>Request id</dt>
        <dd>
          <code safe>{result.request_id}</code>
        </dd>
        <dt>Ran at</dt>
        <dd safe>{new Date(result.at).toISOString().replace("T", " ").slice(0, 19) + " UTC"}</dd>
      </dl>
      <p safe>
        {result.cost === null
          ? "Paid by the house: recorded on the house account, never on yours."
          : `Paid by the house: ${usd(result.cost)} (recorded on the house account, never on yours).`}
      </p>
      <p class="muted">The route proof can be run once per account: this is this account's proof.</p>
    </>
  );
}
