import { describe, expect, it } from "bun:test";
import { readSseFrames, SseSplitter, type SseFrame } from "../../src/core/sse.ts";

function streamOf(chunks: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
}

async function frames(chunks: string[]): Promise<SseFrame[]> {
  const out: SseFrame[] = [];
  for await (const frame of readSseFrames(streamOf(chunks))) out.push(frame);
  return out;
}

describe("core/sse readSseFrames", () => {
  it("splits data frames and keeps event names", async () => {
    expect(await frames(['data: {"a":1}\n\nevent: ping\ndata: {}\n\ndata: [DONE]\n\n'])).toEqual([
      { data: '{"a":1}' },
      { event: "ping", data: "{}" },
      { data: "[DONE]" },
    ]);
  });

  it("joins frames cut across reads at any byte", async () => {
    const text = 'event: message_start\ndata: {"type":"message_start"}\n\ndata: {"x":"y"}\n\n';
    for (let cut = 1; cut < text.length; cut++) {
      expect(await frames([text.slice(0, cut), text.slice(cut)])).toEqual([
        { event: "message_start", data: '{"type":"message_start"}' },
        { data: '{"x":"y"}' },
      ]);
    }
  });

  it("reads CRLF and CR line ends, even when a CRLF is split between reads", async () => {
    expect(await frames(["data: 1\r", "\n\r\ndata: 2\r\n\r\n"])).toEqual([{ data: "1" }, { data: "2" }]);
    expect(await frames(["data: 1\r\rdata: 2\r\r"])).toEqual([{ data: "1" }, { data: "2" }]);
  });

  it("joins multi-line data, skips comments and frames without data, and reads a last frame without a blank line", async () => {
    expect(await frames([': keep-alive\n\ndata: a\ndata: b\nid: 7\n\nevent: x\n\ndata:{"tail":1}'])).toEqual([{ data: "a\nb" }, { data: '{"tail":1}' }]);
  });

  it("dispatches a last frame without its blank line only when it is a whole event ([DONE] or complete JSON)", async () => {
    expect(await frames(['data: {"a":1}\n\ndata: [DONE]'])).toEqual([{ data: '{"a":1}' }, { data: "[DONE]" }]);
    expect(await frames(['data: {"a":1}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n'])).toEqual([
      { data: '{"a":1}' },
      { event: "message_stop", data: '{"type":"message_stop"}' },
    ]);
  });

  it("drops the half frame of a body cut mid-frame (the SSE spec discards an incomplete event at EOF)", async () => {
    const whole = 'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n';
    const next = 'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n';
    const first = { data: whole.slice(6, -2) };
    for (let cut = 1; cut < next.length - 2; cut++) expect(await frames([whole, next.slice(0, cut)])).toEqual([first]);
    // Cut only in its blank line: the frame is whole, so it is dispatched.
    for (const cut of [next.length - 2, next.length - 1]) expect(await frames([whole, next.slice(0, cut)])).toEqual([first, { data: next.slice(6, -2) }]);
    expect(await frames(["event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overl"])).toEqual([]);
    expect(await frames(["data: [DO"])).toEqual([]);
  });

  it("keeps many frames of one read in order", async () => {
    const many = Array.from({ length: 500 }, (_, i) => `data: ${i}\n\n`).join("");
    const got = await frames([many]);
    expect(got.length).toBe(500);
    expect(got[499]).toEqual({ data: "499" });
  });
});

describe("core/sse SseSplitter.feed", () => {
  /** What feed hands over for these reads, a one-line data block as its data (read from the text at its bounds), in order. */
  function fed(reads: string[]): (SseFrame & { inPlace?: true })[] {
    const splitter = new SseSplitter();
    const out: (SseFrame & { inPlace?: true })[] = [];
    const encoder = new TextEncoder();
    const sink = { data: (text: string, start: number, end: number) => out.push({ data: text.slice(start, end), inPlace: true }), frame: (frame: SseFrame) => out.push(frame) };
    for (const read of reads) splitter.feed(encoder.encode(read), sink);
    out.push(...splitter.end());
    return out;
  }

  it("hands one-line data blocks over in place and the others as frames, in order, whatever the reads' cuts", () => {
    const text = 'data: {"a":1}\n\nevent: ping\ndata: {}\n\ndata: ü 😀\r\n\r\ndata: x\ndata: y\n\n: comment\n\ndata: [DONE]\n\n';
    const expected: (SseFrame & { inPlace?: true })[] = [{ data: '{"a":1}', inPlace: true }, { event: "ping", data: "{}" }, { data: "ü 😀", inPlace: true }, { data: "x\ny" }, { data: "[DONE]", inPlace: true }];
    const bytes = new TextEncoder().encode(text);
    for (let cut = 1; cut < bytes.length; cut++) {
      const splitter = new SseSplitter();
      const out: unknown[] = [];
      const sink = { data: (t: string, start: number, end: number) => out.push({ data: t.slice(start, end), inPlace: true }), frame: (frame: SseFrame) => out.push(frame) };
      splitter.feed(bytes.slice(0, cut), sink); // cuts inside a multi-byte character too
      splitter.feed(bytes.slice(cut), sink);
      expect(out).toEqual(expected);
    }
    expect(fed([text])).toEqual(expected);
  });

  it("leaves a block without its blank line to end(), as push does", () => {
    expect(fed(['data: {"a":1}\n\ndata: {"b":', "2}"])).toEqual([{ data: '{"a":1}', inPlace: true }, { data: '{"b":2}' }]);
    expect(fed(['data: {"a":1}\n\ndata: {"b":'])).toEqual([{ data: '{"a":1}', inPlace: true }]);
  });
});
