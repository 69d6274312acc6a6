import { InvalidRequestError } from "../../../core/errors.ts";
import type { CanonicalImagePart } from "../../../core/canonical.ts";

type ImageSource = CanonicalImagePart["source"];

const DATA_URL = /^data:([^;,]+)(?:;[^,]*)?;base64,(.*)$/s;

/** The text of a system, assistant or tool message: a string, or text/refusal parts joined. */
export function chatMessageText(content: unknown, where: string): string {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw new InvalidRequestError(`invalid request: '${where}' must be a string or an array of parts`, { param: where });
  let text = "";
  content.forEach((part: Record<string, unknown>, index) => {
    if (part?.type === "text" && typeof part.text === "string") text += part.text;
    else if (part?.type === "refusal" && typeof part.refusal === "string") text += part.refusal;
    else {
      throw new InvalidRequestError(`invalid request: '${where}.${index}.type' ${JSON.stringify(part?.type)} is not allowed here (text parts are)`, {
        param: `${where}.${index}.type`,
      });
    }
  });
  return text;
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
