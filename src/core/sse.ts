/** Server-sent events: upstream bytes -> frames, and frames -> text. */

export interface SseFrame {
  event?: string;
  data: string;
}

/** Where SseSplitter.feed hands the frames it cuts. */
export interface SseSink {
  /** A frame whose data is text[start, end) (it had no other field). */
  data(text: string, start: number, end: number): void;
  frame(frame: SseFrame): void;
}

/**
 * Splits SSE bytes into frames (events separated by a blank line; multi-line data joined), synchronously:
 * `push` takes one read's bytes and returns the frames they complete, `end` the last one left. One pass over
 * the text: frames are cut at positions, the buffer is trimmed once per read.
 */
export class SseSplitter {
  private readonly decoder = new TextDecoder();
  private buffer = "";

  push(bytes: Uint8Array): SseFrame[] {
    const buffer = normalizeNewlines(this.buffer + this.decoder.decode(bytes, { stream: true }), false);
    const frames: SseFrame[] = [];
    let start = 0;
    let end: number;
    while ((end = buffer.indexOf("\n\n", start)) !== -1) {
      const frame = parseBlock(buffer, start, end);
      start = end + 2;
      if (frame) frames.push(frame);
    }
    this.buffer = start > 0 ? buffer.slice(start) : buffer;
    return frames;
  }

  /**
   * Like push, with each frame handed to `sink` as it is cut, in order. A block that is one `data: ` line goes as
   * the read's text and its data's bounds: a relay that reads it in place skips copying it out (the copy of a
   * substring's characters was a third of a content chunk's relay).
   */
  feed(bytes: Uint8Array, sink: SseSink): void {
    const buffer = normalizeNewlines(this.buffer + this.decoder.decode(bytes, { stream: true }), false);
    let start = 0;
    let end: number;
    while ((end = buffer.indexOf("\n\n", start)) !== -1) {
      if (buffer.startsWith("data: ", start) && buffer.indexOf("\n", start) === end) sink.data(buffer, start + 6, end);
      else {
        const frame = parseBlock(buffer, start, end);
        if (frame) sink.frame(frame);
      }
      start = end + 2;
    }
    this.buffer = start > 0 ? buffer.slice(start) : buffer;
  }

  /**
   * The frame left when the body ends without its blank line: dispatched only when it is a whole event (its
   * data `[DONE]` or complete JSON). A body cut mid-frame leaves half a frame, which the SSE spec discards
   * at EOF: relaying it would hand the client a frame it cannot parse.
   */
  end(): SseFrame[] {
    const buffer = normalizeNewlines(this.buffer + this.decoder.decode(), true);
    this.buffer = "";
    const tail = parseBlock(buffer, 0, buffer.length);
    return tail && isWholeEvent(tail.data) ? [tail] : [];
  }
}

/** Whether a frame's data is a complete event (checked once per stream, on the frame left at its end). */
function isWholeEvent(data: string): boolean {
  if (data.trim() === "[DONE]") return true;
  try {
    JSON.parse(data);
    return true;
  } catch {
    return false;
  }
}

/** The frames of a whole SSE body, one at a time (the pipeline drives an SseSplitter itself). */
export async function* readSseFrames(body: { getReader(): { read(): Promise<{ done: boolean; value?: Uint8Array }> } }): AsyncGenerator<SseFrame> {
  const splitter = new SseSplitter();
  const reader = body.getReader();
  for (let read = await reader.read(); !read.done; read = await reader.read()) yield* splitter.push(read.value!);
  yield* splitter.end();
}

/** CRLF and CR line ends as LF. A CR at the very end may be half of a CRLF: kept for the next read. */
function normalizeNewlines(text: string, final: boolean): string {
  if (text.indexOf("\r") === -1) return text;
  const keep = !final && text.endsWith("\r");
  const body = (keep ? text.slice(0, -1) : text).replace(/\r\n?/g, "\n");
  return keep ? body + "\r" : body;
}

/** One event from text[start, end): its `event` and its `data` lines joined; comments and other fields ignored. */
function parseBlock(text: string, start: number, end: number): SseFrame | null {
  // The usual block, one `data: ` line, cut without looking at its fields: most of the splitter's time went there.
  if (text.startsWith("data: ", start)) {
    const newline = text.indexOf("\n", start);
    if (newline === -1 || newline >= end) return { data: text.slice(start + 6, end) };
  }
  let event: string | undefined;
  let data: string | undefined;
  let lineStart = start;
  while (lineStart < end) {
    let lineEnd = text.indexOf("\n", lineStart);
    if (lineEnd === -1 || lineEnd > end) lineEnd = end;
    if (lineEnd > lineStart && text.charCodeAt(lineStart) !== 58 /* ":" comment */) {
      const colon = text.indexOf(":", lineStart);
      const hasValue = colon !== -1 && colon < lineEnd;
      const field = text.slice(lineStart, hasValue ? colon : lineEnd);
      let valueStart = hasValue ? colon + 1 : lineEnd;
      if (text.charCodeAt(valueStart) === 32 /* " " */ && valueStart < lineEnd) valueStart++;
      const value = text.slice(valueStart, lineEnd);
      if (field === "data") data = data === undefined ? value : data + "\n" + value;
      else if (field === "event") event = value;
    }
    lineStart = lineEnd + 1;
  }
  if (data === undefined) return null;
  return event === undefined ? { data } : { event, data };
}

/** One SSE frame as text. */
export function sseFrame(data: string, event?: string): string {
  return event === undefined ? `data: ${data}\n\n` : `event: ${event}\ndata: ${data}\n\n`;
}
