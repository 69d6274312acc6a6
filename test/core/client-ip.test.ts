import { describe, expect, it } from "bun:test";
import { TrustedProxies, addressGroup, forwardedClientIp, formatAddress, parseAddress } from "../../src/core/client-ip.ts";

const trusting = (...cidrs: string[]) => TrustedProxies.parse(cidrs);

describe("client-ip addresses", () => {
  it("reads IPv4, IPv6 (compressed, embedded IPv4, zone id) and writes them in their shortest form", () => {
    const cases: [string, string][] = [
      ["10.1.2.3", "10.1.2.3"],
      ["::1", "::1"],
      ["::", "::"],
      ["2001:DB8:0:0:0:0:0:1", "2001:db8::1"],
      ["2001:db8:0:1:0:0:0:1", "2001:db8:0:1::1"],
      ["fe80::1%eth0", "fe80::1"],
      ["::ffff:192.168.0.7", "192.168.0.7"],
      ["1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"],
    ];
    for (const [input, output] of cases) expect(formatAddress(parseAddress(input)!)).toBe(output);
  });

  it("refuses what is not an address", () => {
    for (const input of ["", "unknown", "1.2.3", "256.1.1.1", "1.2.3.4.5", "1::2::3", "12345::", "1:2:3:4:5:6:7:8:9", "1.2.3.4::", ":1:2:3:4:5:6:7", "g::1", "<script>"]) {
      expect(parseAddress(input)).toBeUndefined();
    }
  });

  it("refuses a trusted_proxies entry that is no address or range, naming it", () => {
    expect(() => trusting("10.0.0.0/33")).toThrow('"10.0.0.0/33"');
    expect(() => trusting("fd00::/129")).toThrow('"fd00::/129"');
    expect(() => trusting("localhost")).toThrow('"localhost"');
    expect(() => trusting("10.0.0.0/")).toThrow('"10.0.0.0/"');
  });
});

describe("forwardedClientIp", () => {
  it("an untrusted peer is the client, whatever X-Forwarded-For says", () => {
    expect(forwardedClientIp("203.0.113.9", "198.51.100.1", trusting("10.0.0.0/8"))).toBe("203.0.113.9");
    expect(forwardedClientIp("203.0.113.9", "198.51.100.1", trusting())).toBe("203.0.113.9");
  });

  it("a trusted peer's forwarded address is the client", () => {
    expect(forwardedClientIp("10.0.0.5", "198.51.100.1", trusting("10.0.0.0/8"))).toBe("198.51.100.1");
    expect(forwardedClientIp("::ffff:10.0.0.5", "198.51.100.1", trusting("10.0.0.0/8"))).toBe("198.51.100.1");
  });

  it("takes the rightmost untrusted address: what the client wrote to the left is ignored", () => {
    const trusted = trusting("10.0.0.0/8", "fd00::/8");
    expect(forwardedClientIp("10.0.0.5", "1.1.1.1, 198.51.100.1, 10.0.0.9", trusted)).toBe("198.51.100.1");
    expect(forwardedClientIp("fd00::5", "2001:db8::7, fd00::9", trusted)).toBe("2001:db8::7");
  });

  it("all hops trusted: the leftmost; a trusted peer without the header: the peer", () => {
    const trusted = trusting("10.0.0.0/8");
    expect(forwardedClientIp("10.0.0.5", "10.0.0.1, 10.0.0.2", trusted)).toBe("10.0.0.1");
    expect(forwardedClientIp("10.0.0.5", null, trusted)).toBe("10.0.0.5");
  });

  it("stops at an entry that is no address (the last trusted hop answers), and strips ports", () => {
    const trusted = trusting("10.0.0.0/8");
    expect(forwardedClientIp("10.0.0.5", "198.51.100.1, <script>", trusted)).toBe("10.0.0.5");
    expect(forwardedClientIp("10.0.0.5", "198.51.100.1:5555", trusted)).toBe("198.51.100.1");
    expect(forwardedClientIp("10.0.0.5", "[2001:db8::1]:443", trusted)).toBe("2001:db8::1");
  });

  it("matches prefixes bit by bit, IPv4 ranges against IPv4-mapped peers too", () => {
    const trusted = trusting("192.168.4.0/22", "2001:db8:8000::/33", "127.0.0.1");
    expect(forwardedClientIp("192.168.7.255", "8.8.8.8", trusted)).toBe("8.8.8.8");
    expect(forwardedClientIp("192.168.8.0", "8.8.8.8", trusted)).toBe("192.168.8.0");
    expect(forwardedClientIp("2001:db8:ffff::1", "8.8.8.8", trusted)).toBe("8.8.8.8");
    expect(forwardedClientIp("2001:db8:7fff::1", "8.8.8.8", trusted)).toBe("2001:db8:7fff::1");
    expect(forwardedClientIp("::ffff:127.0.0.1", "8.8.8.8", trusted)).toBe("8.8.8.8");
    expect(forwardedClientIp("127.0.0.2", "8.8.8.8", trusted)).toBe("127.0.0.2");
    expect(forwardedClientIp("9.9.9.9", "8.8.8.8", trusting("0.0.0.0/0"))).toBe("8.8.8.8");
    expect(forwardedClientIp("2001:db8::1", "8.8.8.8", trusting("::/0"))).toBe("8.8.8.8");
  });
});

describe("addressGroup", () => {
  it("keeps an IPv4 address as it is and counts an IPv6 address with its network", () => {
    expect(addressGroup("198.51.100.7", 56)).toBe("198.51.100.7");
    expect(addressGroup("2001:db8:1:2ff:aaaa:bbbb:cccc:dddd", 56)).toBe("2001:db8:1:200::/56");
    expect(addressGroup("2001:db8:1:2ff::1", 56)).toBe(addressGroup("2001:db8:1:200::ffff", 56));
    expect(addressGroup("2001:db8:1:300::1", 56)).not.toBe(addressGroup("2001:db8:1:200::1", 56));
    expect(addressGroup("2001:db8:1:2:3:4:5:6", 64)).toBe("2001:db8:1:2::/64");
    expect(addressGroup("2001:db8:1:2:3:4:5:6", 60)).toBe("2001:db8:1::/60");
    expect(addressGroup("2001:db8:1:2:3:4:5:6", 128)).toBe("2001:db8:1:2:3:4:5:6");
  });

  it("leaves what is not an address as it is", () => {
    expect(addressGroup("unknown", 56)).toBe("unknown");
    expect(addressGroup("not:an:address", 56)).toBe("not:an:address");
  });
});
