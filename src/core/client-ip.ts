/**
 * Who the client is: the socket peer, or, when the peer is one of the operator's trusted proxies
 * (`server.trusted_proxies`), the address that proxy forwarded in X-Forwarded-For. The edge limit and the
 * request lines both ask here, so they always agree.
 */

/** A parsed address: 16 bytes, IPv4 as its IPv4-mapped IPv6 form (::ffff:a.b.c.d). */
type Address = Uint8Array;

interface Cidr {
  readonly bytes: Address;
  readonly bits: number;
}

/** A set of CIDR ranges (IPv4 and IPv6; a bare address is a single-address range). */
export class TrustedProxies {
  readonly #ranges: readonly Cidr[];

  private constructor(ranges: readonly Cidr[]) {
    this.#ranges = ranges;
  }

  /** Parses a list of CIDRs; throws an Error naming the first entry that is not one. */
  static parse(entries: readonly string[]): TrustedProxies {
    return new TrustedProxies(entries.map(parseCidr));
  }

  get empty(): boolean {
    return this.#ranges.length === 0;
  }

  contains(address: Address): boolean {
    return this.#ranges.some((range) => inRange(address, range));
  }
}

/**
 * The client's address for a request whose socket peer is `peer`: the peer itself unless it is trusted; then
 * X-Forwarded-For read from the right, skipping trusted proxies, and the first untrusted address wins (the
 * rightmost one a trusted proxy vouched for; what the client wrote further left is ignored). All trusted: the
 * leftmost. An entry that is not an address stops the walk at the last trusted hop.
 */
export function forwardedClientIp(peer: string, forwardedFor: string | null, trusted: TrustedProxies): string {
  // The common case (no proxy configured, or no header) parses nothing: this runs on every request.
  if (trusted.empty || forwardedFor === null) return unmapped(peer);
  const peerAddress = parseAddress(peer);
  if (peerAddress === undefined || !trusted.contains(peerAddress)) return unmapped(peer);
  let current = peerAddress;
  const hops = forwardedFor.split(",");
  for (let index = hops.length - 1; index >= 0; index--) {
    const hop = parseAddress(stripPort(hops[index]!.trim()));
    if (hop === undefined) break;
    current = hop;
    if (!trusted.contains(hop)) break;
  }
  return formatAddress(current);
}

/** An IPv4-mapped IPv6 peer (a dual-stack socket) as its IPv4 address. */
function unmapped(peer: string): string {
  return peer.startsWith("::ffff:") && peer.includes(".") ? peer.slice(7) : peer;
}

/** `[::1]:80` -> `::1`, `1.2.3.4:80` -> `1.2.3.4`; anything else as it is. */
function stripPort(entry: string): string {
  if (entry.startsWith("[")) {
    const end = entry.indexOf("]");
    return end === -1 ? entry : entry.slice(1, end);
  }
  const colon = entry.indexOf(":");
  return colon !== -1 && colon === entry.lastIndexOf(":") ? entry.slice(0, colon) : entry;
}

function parseCidr(entry: string): Cidr {
  const text = entry.trim();
  const slash = text.indexOf("/");
  const bytes = parseAddress(slash === -1 ? text : text.slice(0, slash));
  if (bytes === undefined) throw new Error(`"${entry}" is not an IPv4 or IPv6 address or CIDR range`);
  const ipv4 = !text.includes(":");
  const width = ipv4 ? 32 : 128;
  const prefix = slash === -1 ? width : /^\d{1,3}$/.test(text.slice(slash + 1)) ? Number(text.slice(slash + 1)) : NaN;
  if (!(prefix >= 0 && prefix <= width)) throw new Error(`"${entry}" has no valid prefix length (0-${width})`);
  return { bytes, bits: ipv4 ? 96 + prefix : prefix };
}

function inRange(address: Address, range: Cidr): boolean {
  let bits = range.bits;
  for (let index = 0; bits > 0; index++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((address[index]! & mask) !== (range.bytes[index]! & mask)) return false;
  }
  return true;
}

const IPV4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

/** An IPv4 or IPv6 address (a zone id is dropped) as 16 bytes; undefined when it is neither. */
export function parseAddress(text: string): Address | undefined {
  const ipv4 = parseIpv4(text);
  if (ipv4) return mapped(ipv4);
  return parseIpv6(text.split("%")[0]!);
}

function parseIpv4(text: string): number[] | undefined {
  const match = IPV4.exec(text);
  if (!match) return undefined;
  const parts = match.slice(1).map(Number);
  return parts.every((part) => part <= 255) ? parts : undefined;
}

function mapped(ipv4: number[]): Address {
  const bytes = new Uint8Array(16);
  bytes[10] = 0xff;
  bytes[11] = 0xff;
  bytes.set(ipv4, 12);
  return bytes;
}

function parseIpv6(text: string): Address | undefined {
  if (!text.includes(":") || text.length > 45) return undefined;
  // An IPv4 ending (::ffff:1.2.3.4) stands for the last two groups.
  let ipv4: number[] | undefined;
  let hex = text;
  if (text.includes(".")) {
    const lastColon = text.lastIndexOf(":");
    ipv4 = parseIpv4(text.slice(lastColon + 1));
    if (!ipv4) return undefined;
    hex = text.slice(0, lastColon + 1) + "0:0";
  }
  const halves = hex.split("::");
  if (halves.length > 2) return undefined;
  const head = halves[0] === "" ? [] : halves[0]!.split(":");
  const tail = halves.length === 1 || halves[1] === "" ? [] : halves[1]!.split(":");
  if (halves.length === 1 ? head.length !== 8 : head.length + tail.length > 7) return undefined;
  if (![...head, ...tail].every((group) => /^[0-9a-fA-F]{1,4}$/.test(group))) return undefined;
  const words = [...head, ...Array(8 - head.length - tail.length).fill("0"), ...tail].map((group) => parseInt(group, 16));
  const bytes = new Uint8Array(16);
  words.forEach((word, index) => {
    bytes[index * 2] = word >> 8;
    bytes[index * 2 + 1] = word & 0xff;
  });
  if (ipv4) bytes.set(ipv4, 12);
  return bytes;
}

/** IPv4 (and IPv4-mapped IPv6) as dotted quads; IPv6 in its shortest form (RFC 5952). */
export function formatAddress(bytes: Address): string {
  if (bytes.slice(0, 10).every((byte) => byte === 0) && bytes[10] === 0xff && bytes[11] === 0xff) {
    return `${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`;
  }
  const words = Array.from({ length: 8 }, (_, index) => (bytes[index * 2]! << 8) | bytes[index * 2 + 1]!);
  // The longest run of two or more zero words becomes "::".
  let bestStart = -1;
  let bestLength = 1;
  for (let start = 0; start < 8; start++) {
    let length = 0;
    while (start + length < 8 && words[start + length] === 0) length++;
    if (length > bestLength) {
      bestStart = start;
      bestLength = length;
    }
  }
  const hex = words.map((word) => word.toString(16));
  if (bestStart === -1) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLength).join(":")}`;
}

/** The IPv6 prefix a per-address limit counts by default (express-rate-limit's `ipv6Subnet` default). */
export const IPV6_CLIENT_PREFIX = 56;

/**
 * The key a client address is counted under by a per-address limit: an IPv4 address itself; an IPv6 address its
 * network, the first `ipv6PrefixBits` bits as a CIDR (`2001:db8:0:100::/56`). One subscriber gets a /64 or a
 * /56 and can send from any address in it, so counting IPv6 per address would let one client step around the
 * limit; 128 counts each address.
 */
export function addressGroup(address: string, ipv6PrefixBits: number): string {
  if (ipv6PrefixBits >= 128 || !address.includes(":")) return address;
  const bytes = parseAddress(address);
  if (bytes === undefined) return address;
  for (let index = 0; index < 16; index++) {
    const bits = ipv6PrefixBits - index * 8;
    bytes[index]! &= bits >= 8 ? 0xff : bits <= 0 ? 0 : (0xff << (8 - bits)) & 0xff;
  }
  return `${formatAddress(bytes)}/${ipv6PrefixBits}`;
}

interface PeerSource {
  requestIP(request: Request): { address: string } | null;
}

/** The client addresses of one listening server's requests (the server is known once it listens). */
export class ClientAddresses {
  readonly #trusted: TrustedProxies;
  #server: PeerSource | undefined;

  constructor(trustedProxies: readonly string[]) {
    this.#trusted = TrustedProxies.parse(trustedProxies);
  }

  listenOn(server: PeerSource): void {
    this.#server = server;
  }

  /** The client's address (forwardedClientIp); "unknown" when the socket is gone. */
  of(request: Request): string {
    const peer = this.#server?.requestIP(request)?.address;
    if (peer === undefined) return "unknown";
    return forwardedClientIp(peer, this.#trusted.empty ? null : request.headers.get("x-forwarded-for"), this.#trusted);
  }
}
