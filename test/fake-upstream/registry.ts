/**
 * The fake upstream's routes, registered by each vendor's fake module (test/fake-upstream/<vendor>.ts, or
 * test/plugins/providers/<vendor>/fake.ts) when it is loaded: server.ts discovers those modules and names none of
 * them, so a new vendor's fake is one new file calling `registerFake`.
 */
import type { Ctx } from "./server.ts";

export type FakeHandler = (ctx: Ctx) => Response | Promise<Response>;

export interface FakeRoute {
  method: string;
  /** The request path without its query string; with `prefix`, what the path starts with. */
  path: string;
  prefix?: boolean;
  handler: FakeHandler;
}

/** Exact routes, keyed by "METHOD /path". */
const exact = new Map<string, { vendor: string; handler: FakeHandler }>();
/** Prefix routes, checked in order after exact routes miss. */
const prefixes: { vendor: string; method: string; prefix: string; handler: FakeHandler }[] = [];

/** Adds a vendor's routes; a route another vendor already serves is a mistake in the fakes. */
export function registerFake(vendor: string, routes: readonly FakeRoute[]): void {
  for (const route of routes) {
    if (route.prefix) {
      const taken = prefixes.find((p) => p.method === route.method && p.prefix === route.path);
      if (taken && taken.vendor !== vendor) throw new Error(`fake upstream: ${route.method} ${route.path}* is served by ${taken.vendor} and ${vendor}`);
      if (!taken) prefixes.push({ vendor, method: route.method, prefix: route.path, handler: route.handler });
      continue;
    }
    const key = route.method + " " + route.path;
    const taken = exact.get(key);
    if (taken && taken.vendor !== vendor) throw new Error(`fake upstream: ${key} is served by ${taken.vendor} and ${vendor}`);
    exact.set(key, { vendor, handler: route.handler });
  }
}

/** The handler for a request, or undefined (the server answers 404). */
export function fakeRouteFor(method: string, path: string): FakeHandler | undefined {
  const route = exact.get(method + " " + path);
  if (route) return route.handler;
  for (const p of prefixes) {
    if (p.method === method && path.startsWith(p.prefix)) return p.handler;
  }
  return undefined;
}

/** The vendors registered so far (for tests of the registry). */
export function registeredVendors(): string[] {
  const vendors = new Set<string>();
  for (const { vendor } of exact.values()) vendors.add(vendor);
  for (const { vendor } of prefixes) vendors.add(vendor);
  return [...vendors];
}
