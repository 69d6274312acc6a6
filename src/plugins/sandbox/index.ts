import { Type } from "@sinclair/typebox";
import { definePlugin, type Provider } from "../../core/plugin.ts";
import { openaiChat } from "../../formats/openai-chat/index.ts";
import { openaiImages } from "../../formats/openai-images/index.ts";
import { jsonHeaders } from "../../transport/index.ts";
import { sandboxCompletion, sandboxReply, sandboxStreamFrames } from "./reply.ts";
import { sandboxImages } from "./images.ts";

const CHAT = "sandbox:chat/completions";
const IMAGES = "sandbox:images/generations";
const NO_HEADERS = jsonHeaders({});

/** A built-in simulated upstream that serves every catalog model, for trying the gateway offline. */
export default definePlugin({
  name: "sandbox",
  requires: ["catalog"],
  configSchema: Type.Object({}),
  setup() {
    const provider: Provider = {
      codecs: [openaiChat, openaiImages],
      servesEveryModel: true, // no provider key is missing while the sandbox answers (start-up log, GET /ready)
      // Nothing goes over the network: `send` answers the call, the URL only says which API it is.
      deployments: [{ name: "sandbox#1", weight: 1, endpoint: (_ctx, route) => ({ url: route.codec === openaiImages ? IMAGES : CHAT, headers: NO_HEADERS }) }],
      async send(ctx, call) {
        const body = call.body as Record<string, unknown>;
        if (call.url === IMAGES) return Response.json(sandboxImages(body));
        const reply = sandboxReply(body as never, "chatcmpl-sandbox-" + ctx.requestId.slice(4, 28));
        if (!body.stream) return Response.json(sandboxCompletion(reply));
        const frames = sandboxStreamFrames(reply, (body.stream_options as { include_usage?: boolean })?.include_usage === true);
        return new Response(frames.join(""), { headers: { "content-type": "text/event-stream" } });
      },
    };
    return {
      providers: { sandbox: provider },
      onRequest(ctx) {
        if (ctx.target) ctx.target = { provider: "sandbox", upstreamModel: ctx.target.upstreamModel };
      },
    };
  },
});
