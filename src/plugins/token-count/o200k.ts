import { O200K_TOKEN_SPLIT_REGEX } from "gpt-tokenizer/encodingParams/constants";

/**
 * A counting-only o200k byte-pair encoder over compact tables. The ranks live in typed arrays: every
 * token's bytes back to back, their offsets, and an open-addressing hash table from bytes to rank
 * (a few MB in all). gpt-tokenizer keeps the same table as a Map of 200k strings (several times that
 * resident, more as its merge cache fills; docs/performance.md). Same pre-tokenizing regex (gpt-tokenizer's own) and the same merge rule
 * (tiktoken's: repeatedly merge the adjacent pair whose bytes have the lowest rank), so the same counts;
 * the test compares them with gpt-tokenizer on every rank and on varied texts. Text is counted as
 * ordinary text: a special-token string such as `<|endoftext|>` in a prompt is just characters.
 */
export interface O200kCounter {
  count(text: string): number;
  /** The rank of these bytes, or -1. */
  rankOf(bytes: Uint8Array): number;
  readonly tokens: number;
}

/** The o200k pre-tokenizer, anchored where the last piece ended. */
export const PIECE = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, "uy");

const EMPTY = 0; // table slots hold rank + 1
const MERGED_PIECES_KEPT = 8192;
/** Pieces up to this many bytes merge with the plain scan (fastest when short); longer ones with a heap. */
const SHORT_PIECE_BYTES = 64;

/** Builds the counter from a `.tiktoken` file's text: one `base64(bytes) rank` line per token. */
export function buildO200kCounter(tiktoken: string): O200kCounter {
  const lines = tiktoken.split("\n").filter((line) => line.length > 0);
  const tokens = lines.length;
  const offsets = new Uint32Array(tokens + 1);
  const decoded: Uint8Array[] = new Array(tokens);
  let total = 0;
  for (const line of lines) {
    const space = line.indexOf(" ");
    const rank = Number(line.slice(space + 1));
    if (!Number.isInteger(rank) || rank < 0 || rank >= tokens) throw new Error(`o200k data: bad rank in line "${line.slice(0, 40)}"`);
    const bytes = Buffer.from(line.slice(0, space), "base64");
    decoded[rank] = bytes;
    total += bytes.length;
  }
  const bytes = new Uint8Array(total);
  for (let rank = 0, at = 0; rank < tokens; rank++) {
    const token = decoded[rank];
    if (token === undefined) throw new Error(`o200k data: rank ${rank} missing`);
    offsets[rank] = at;
    bytes.set(token, at);
    at += token.length;
  }
  offsets[tokens] = total;

  let size = 1;
  while (size < tokens * 2) size <<= 1;
  const mask = size - 1;
  const table = new Int32Array(size);
  for (let rank = 0; rank < tokens; rank++) {
    let slot = hash(bytes, offsets[rank]!, offsets[rank + 1]!) & mask;
    while (table[slot] !== EMPTY) slot = (slot + 1) & mask;
    table[slot] = rank + 1;
  }

  /** The rank of buffer[start, end), or -1. */
  function lookup(buffer: Uint8Array, start: number, end: number): number {
    return lookupHashed(buffer, start, end, hash(buffer, start, end));
  }

  /** lookup, with the bytes' hash already known. */
  function lookupHashed(buffer: Uint8Array, start: number, end: number, hashed: number): number {
    const length = end - start;
    let slot = hashed & mask;
    for (;;) {
      const entry = table[slot]!;
      if (entry === EMPTY) return -1;
      const rank = entry - 1;
      const from = offsets[rank]!;
      if (offsets[rank + 1]! - from === length) {
        let i = 0;
        while (i < length && bytes[from + i] === buffer[start + i]) i++;
        if (i === length) return rank;
      }
      slot = (slot + 1) & mask;
    }
  }

  // Scratch space reused by every piece (pieces are short; a longer one grows it).
  let piece = new Uint8Array(1024);
  let starts = new Int32Array(1025);
  let ranks = new Float64Array(1025);
  const encoder = new TextEncoder();

  // Pieces that needed merging, by text (words outside the vocabulary recur in a prompt); cleared when full.
  const merged = new Map<string, number>();

  /**
   * Tokens of the pre-tokenized piece text[start, end): one when it is a token, else tiktoken's byte-pair merge.
   * An ASCII piece (most of them) is its own UTF-8: copied and hashed in one pass, and sliced out of the text
   * only when it is not a token (a slice, an encode call and a map lookup per piece were most of a count).
   */
  function countPiece(text: string, start: number, end: number): number {
    const chars = end - start;
    if (chars * 3 > piece.length) {
      piece = new Uint8Array(chars * 3);
      starts = new Int32Array(piece.length + 1);
      ranks = new Float64Array(piece.length + 1);
    }
    let h = FNV_OFFSET;
    let ascii = true;
    for (let i = 0; i < chars; i++) {
      const c = text.charCodeAt(start + i);
      if (c >= 128) {
        ascii = false;
        break;
      }
      piece[i] = c;
      h = Math.imul(h ^ c, FNV_PRIME);
    }
    if (ascii && lookupHashed(piece, 0, chars, h >>> 0) >= 0) return 1;
    const pieceText = text.slice(start, end);
    const known = merged.get(pieceText);
    if (known !== undefined) return known;
    const length = ascii ? chars : encoder.encodeInto(pieceText, piece).written;
    if (!ascii && lookup(piece, 0, length) >= 0) return 1;
    if (length > SHORT_PIECE_BYTES) return mergedPartsOfLongPiece(length); // rare, and not worth keeping
    const parts = mergedParts(length);
    if (merged.size >= MERGED_PIECES_KEPT) merged.clear();
    merged.set(pieceText, parts);
    return parts;
  }

  function mergedParts(length: number): number {
    // parts: starts[0..parts]; ranks[i] = rank of the bytes of parts i and i+1 together.
    let parts = length;
    for (let i = 0; i <= length; i++) starts[i] = i;
    const pairRank = (i: number) => (i + 2 <= parts ? rankOrInfinity(starts[i]!, starts[i + 2]!) : Infinity);
    for (let i = 0; i < parts; i++) ranks[i] = pairRank(i);
    while (parts > 1) {
      let lowest = Infinity;
      let at = -1;
      for (let i = 0; i < parts - 1; i++) {
        if (ranks[i]! < lowest) {
          lowest = ranks[i]!;
          at = i;
        }
      }
      if (at < 0) break;
      // Merge parts `at` and `at + 1`: drop boundary at + 1.
      starts.copyWithin(at + 1, at + 2, parts + 1);
      ranks.copyWithin(at + 1, at + 2, parts);
      parts -= 1;
      ranks[at] = pairRank(at);
      if (at > 0) ranks[at - 1] = pairRank(at - 1);
    }
    return parts;
  }

  /**
   * The same merge for a long piece (a run of letters with no space can be megabytes): the lowest-rank
   * pair found with a heap instead of a scan, so O(n log n) instead of O(n²) (a 40 KB word took 0.8 s to
   * count, a 1 MB one would block the event loop for minutes). Heap entries are (rank, start, end of the
   * pair) ordered by rank then start, which is the scan's "lowest rank, leftmost first"; an entry whose
   * parts changed since it was pushed is skipped when popped.
   */
  function mergedPartsOfLongPiece(length: number): number {
    const next = new Int32Array(length + 1); // a part is [start, next[start])
    const prev = new Int32Array(length + 1);
    const alive = new Uint8Array(length + 1);
    for (let i = 0; i <= length; i++) {
      next[i] = i + 1;
      prev[i] = i - 1;
      alive[i] = 1;
    }
    const heap = new PairHeap(3 * length);
    for (let i = 0; i + 2 <= length; i++) {
      const rank = lookup(piece, i, i + 2);
      if (rank >= 0) heap.push(rank, i, i + 2);
    }
    let parts = length;
    while (heap.size > 0) {
      const start = heap.topStart();
      const end = heap.topEnd();
      heap.pop();
      if (!alive[start]) continue;
      const second = next[start]!;
      if (second >= length || next[second] !== end) continue; // stale: one of the two parts changed
      alive[second] = 0;
      next[start] = end;
      if (end < length) prev[end] = start;
      parts -= 1;
      const before = prev[start]!;
      if (before >= 0) {
        const rank = lookup(piece, before, end);
        if (rank >= 0) heap.push(rank, before, end);
      }
      if (end < length) {
        const after = next[end]!;
        const rank = lookup(piece, start, after);
        if (rank >= 0) heap.push(rank, start, after);
      }
    }
    return parts;
  }

  function rankOrInfinity(start: number, end: number): number {
    const rank = lookup(piece, start, end);
    return rank < 0 ? Infinity : rank;
  }

  return {
    tokens,
    count(text: string): number {
      // The pieces `text.matchAll(O200K_TOKEN_SPLIT_REGEX)` yields, found with `test` on a sticky copy: no
      // match array, iterator or destructuring per piece (they were most of a counted request's garbage). The pattern matches every code point on its own (a test checks them all), so
      // each piece starts where the last one ended and the sticky test cannot fail before the end.
      let total = 0;
      let at = 0;
      while (at < text.length) {
        PIECE.lastIndex = at;
        if (!PIECE.test(text)) break;
        total += countPiece(text, at, PIECE.lastIndex);
        at = PIECE.lastIndex;
      }
      return total;
    },
    rankOf(buffer: Uint8Array): number {
      return lookup(buffer, 0, buffer.length);
    },
  };
}

/** FNV-1a over buffer[start, end). */
function hash(buffer: Uint8Array, start: number, end: number): number {
  let h = FNV_OFFSET;
  for (let i = start; i < end; i++) h = Math.imul(h ^ buffer[i]!, FNV_PRIME);
  return h >>> 0;
}

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** A binary min-heap of (rank, start, end) ordered by rank, then start. */
class PairHeap {
  private readonly ranks: Int32Array;
  private readonly starts: Int32Array;
  private readonly ends: Int32Array;
  size = 0;

  constructor(capacity: number) {
    this.ranks = new Int32Array(Math.max(1, capacity));
    this.starts = new Int32Array(Math.max(1, capacity));
    this.ends = new Int32Array(Math.max(1, capacity));
  }

  topStart(): number {
    return this.starts[0]!;
  }

  topEnd(): number {
    return this.ends[0]!;
  }

  push(rank: number, start: number, end: number): void {
    let i = this.size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.precedes(rank, start, parent)) break;
      this.move(parent, i);
      i = parent;
    }
    this.set(i, rank, start, end);
  }

  pop(): void {
    const last = --this.size;
    if (last === 0) return;
    const rank = this.ranks[last]!;
    const start = this.starts[last]!;
    const end = this.ends[last]!;
    let i = 0;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= last) break;
      if (child + 1 < last && this.precedes(this.ranks[child + 1]!, this.starts[child + 1]!, child)) child += 1;
      if (!this.precedes(this.ranks[child]!, this.starts[child]!, -1, rank, start)) break;
      this.move(child, i);
      i = child;
    }
    this.set(i, rank, start, end);
  }

  /** Whether (rank, start) comes before the entry at `at` (or, with at = -1, before (otherRank, otherStart)). */
  private precedes(rank: number, start: number, at: number, otherRank = this.ranks[at]!, otherStart = this.starts[at]!): boolean {
    return rank < otherRank || (rank === otherRank && start < otherStart);
  }

  private move(from: number, to: number): void {
    this.set(to, this.ranks[from]!, this.starts[from]!, this.ends[from]!);
  }

  private set(at: number, rank: number, start: number, end: number): void {
    this.ranks[at] = rank;
    this.starts[at] = start;
    this.ends[at] = end;
  }
}
