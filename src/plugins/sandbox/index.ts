import { Type } from "@sinclair/typebox";
import { definePlugin, type Provider } from "../../core/plugin.ts";
import { openaiChat } from "../../formats/openai-chat/index.ts";
import { openaiImages } from "../../formats/openai-images/index.ts";
import { upstreamBodyFor } from "../../core/translate.ts";
import { sandboxCompletion, sandboxReply, sandboxStreamFrames } from "./reply.ts";
import { sandboxImages } from "./images.ts";

/** A built-in simulated upstream that serves every catalog model, for trying the gateway offline. */
export default definePlugin({
  name: "sandbox",
  requires: ["catalog"],
  configSchema: Type.Object({}),
  setup() {
    const provider: Provider = {
      formats: [openaiChat, openaiImages],
      servesEveryModel: true, // no provider key is missing while the sandbox answers (start-up log, GET /ready)
      buildBody: (ctx, format) => upstreamBodyFor(ctx, format, ctx.target!.upstreamModel),
      async send(ctx, body, format) {
        if (format === openaiImages) return Response.json(sandboxImages(body));
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
