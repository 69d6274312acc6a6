import { InvalidRequestError } from "../../../core/errors.ts";
import type { CacheControl, CanonicalImagePart } from "../../../core/canonical.ts";
import { readCacheControl } from "../../cache-control.ts";

type ImageSource = CanonicalImagePart["source"];

const DATA_URL = /^data:([^;,]+)(?:;[^,]*)?;base64,(.*)$/s;

/** One text piece of a system, assistant or tool message, with the breakpoint its part carried. */
export interface ChatTextPiece {
  text: string;
  cacheControl?: CacheControl;
}

/**
 * The text of a system, assistant or tool message as its pieces: a string is one piece, text/refusal parts one
 * each. A breakpoint on the message itself (OpenRouter / Cline style: `{"role", "content": "…", "cache_control"}`)
 * goes on its last piece (docs/wire-formats.md#prompt-caching).
 */
export function chatMessagePieces(message: Record<string, unknown>, where: string): ChatTextPiece[] {
  const pieces = contentPieces(message.content, `${where}.content`);
  const onMessage = readCacheControl(message.cache_control, `${where}.cache_control`, "chat");
  const last = pieces.at(-1);
  if (onMessage && last) last.cacheControl = onMessage;
  return pieces;
}

function contentPieces(content: unknown, where: string): ChatTextPiece[] {
  const pieces: ChatTextPiece[] = [];
  if (content === null || content === undefined) return pieces;
  if (typeof content === "string") pieces.push({ text: content });
  else if (!Array.isArray(content)) throw new InvalidRequestError(`invalid request: '${where}' must be a string or an array of parts`, { param: where });
  else {
    content.forEach((part: Record<string, unknown>, index) => {
      let text: string;
      if (part?.type === "text" && typeof part.text === "string") text = part.text;
      else if (part?.type === "refusal" && typeof part.refusal === "string") text = part.refusal;
      else {
        throw new InvalidRequestError(`invalid request: '${where}.${index}.type' ${JSON.stringify(part?.type)} is not allowed here (text parts are)`, {
          param: `${where}.${index}.type`,
        });
      }
      const cacheControl = readCacheControl(part.cache_control, `${where}.${index}.cache_control`, "chat");
      pieces.push(cacheControl ? { text, cacheControl } : { text });
    });
  }
  return pieces;
}

/** The text of a system, assistant or tool message: a string, or text/refusal parts joined. */
export function chatMessageText(content: unknown, where: string): string {
  return contentPieces(content, where)
    .map((piece) => piece.text)
    .join("");
}

/** The last breakpoint among pieces, if any. */
export function lastCacheControl(pieces: readonly { cacheControl?: CacheControl }[]): CacheControl | undefined {
  for (let index = pieces.length - 1; index >= 0; index--) {
    const cacheControl = pieces[index]!.cacheControl;
    if (cacheControl) return cacheControl;
  }
  return undefined;
}

/** An image_url's url as a canonical image source: data URLs become base64 with their media type. */
export function parseImageUrl(url: unknown, where: string): ImageSource {
  if (typeof url !== "string" || url === "") throw new InvalidRequestError(`invalid request: '${where}' is required`, { param: where });
  if (url.startsWith("data:")) {
    const [, mediaType, data] = DATA_URL.exec(url) ?? [];
    if (mediaType === undefined || data === undefined) {
      throw new InvalidRequestError(`invalid request: '${where}' is a data URL without base64 data`, { param: where });
    }
    return { kind: "base64", mediaType, data };
  }
  return { kind: "url", url };
}

/** A canonical image source as a chat image_url url. */
export function imageUrl(source: ImageSource): string {
  return source.kind === "url" ? source.url : `data:${source.mediaType};base64,${source.data}`;
}
