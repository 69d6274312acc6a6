import { describe, expect, it } from "bun:test";
import type { Account, ApiKey, Repository } from "../../../src/plugins/storage/repository.ts";

/**
 * The admin lists of the storage contract (accounts with a search, an account's keys), run by
 * `repositoryContract` against every store. `open` gives a repository on a fresh, empty store.
 */
export function listingContract(name: string, open: () => Promise<Repository>): void {
  /** Newest first in (created_at, id) order, as both stores must sort. */
  const newestFirst = <T extends { createdAt: number; id: string }>(rows: T[]) =>
    [...rows].sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  const ids = (rows: { id: string }[]) => rows.map((row) => row.id);

  async function newKey(repository: Repository, accountId: string, name: string): Promise<ApiKey> {
    return repository.createKey({
      id: "",
      accountId,
      name,
      keyHash: crypto.randomUUID(),
      label: "sk-gw-Ab3d…x9Yz",
      limit: null,
      models: null,
      requestsPerMinute: null,
      tokensPerMinute: null,
      expiresAt: null,
    });
  }

  describe(`storage listing contract (${name})`, () => {
    it("lists accounts newest first, a page at a time by a (created_at, id) cursor, none lost or repeated", async () => {
      const repository = await open();
      const made: Account[] = [];
      for (let i = 0; i < 7; i++) {
        made.push(await repository.createAccount(`Account ${i}`));
        if (i === 3) await Bun.sleep(3); // at least two distinct milliseconds, for the time cursor below
      }
      const expected = newestFirst(made);
      expect(await repository.listAccounts({ limit: 100 })).toEqual(expected);

      const paged: Account[] = [];
      let page = await repository.listAccounts({ limit: 3 });
      while (page.length > 0) {
        paged.push(...page);
        const last = page[page.length - 1]!;
        page = await repository.listAccounts({ limit: 3, before: last.createdAt, beforeId: last.id });
      }
      expect(ids(paged)).toEqual(ids(expected));

      // A time alone: strictly before that millisecond.
      const cut = made[4]!.createdAt;
      expect(ids(await repository.listAccounts({ limit: 100, before: cut }))).toEqual(ids(expected.filter((a) => a.createdAt < cut)));
      expect(await repository.listAccounts({ limit: 0 })).toEqual([]);
    });

    it("searches accounts by name or id: A-Z case-insensitively, every other character exactly, % and _ as plain characters", async () => {
      const repository = await open();
      const names = ["Acme Corp", "ACME labs", "École Ltd", "école bis", "100% pure", "her_s", "rus", "Other"];
      const made = new Map<string, Account>();
      for (const accountName of names) made.set(accountName, await repository.createAccount(accountName));
      const found = async (q: string) => (await repository.listAccounts({ limit: 100, q })).map((a) => a.name).sort();

      expect(await found("acme")).toEqual(["ACME labs", "Acme Corp"]);
      expect(await found("CORP")).toEqual(["Acme Corp"]);
      // Only A-Z fold: É and é are different characters in both stores.
      expect(await found("École")).toEqual(["École Ltd"]);
      expect(await found("ÉCOLE")).toEqual(["École Ltd"]);
      expect(await found("éCOLE")).toEqual(["école bis"]);
      // No pattern characters: "%" and "_" match themselves only ("r_s" would match "rus" as a LIKE pattern).
      expect(await found("%")).toEqual(["100% pure"]);
      expect(await found("r_s")).toEqual(["her_s"]);
      expect(await found("nobody")).toEqual([]);

      // An id, or a part of one, in any case.
      const other = made.get("Other")!;
      expect(await found(other.id)).toEqual(["Other"]);
      expect(await found(other.id.slice(-12).toUpperCase())).toEqual(["Other"]);

      // The search and the cursor combine.
      const acmes = await repository.listAccounts({ limit: 1, q: "acme" });
      expect(acmes).toHaveLength(1);
      const rest = await repository.listAccounts({ limit: 10, q: "acme", before: acmes[0]!.createdAt, beforeId: acmes[0]!.id });
      expect(ids([...acmes, ...rest])).toEqual(ids(newestFirst([made.get("Acme Corp")!, made.get("ACME labs")!])));
    });

    it("lists an account's keys newest first, deleted ones included, by a cursor, and never another account's", async () => {
      const repository = await open();
      const account = await repository.createAccount("Keys");
      const other = await repository.createAccount("Other");
      const keys: ApiKey[] = [];
      for (let i = 0; i < 5; i++) keys.push(await newKey(repository, account.id, `key ${i}`));
      const foreign = await newKey(repository, other.id, "foreign");
      const deleted = await repository.deleteKey(keys[1]!.id);

      const all = await repository.listKeys(account.id, { limit: 100 });
      const expected = newestFirst(keys.map((key) => (key.id === deleted!.id ? deleted! : key)));
      expect(all).toEqual(expected);
      expect(all.find((key) => key.id === deleted!.id)?.deletedAt).toBeNumber();

      const first = await repository.listKeys(account.id, { limit: 2 });
      const last = first[first.length - 1]!;
      const second = await repository.listKeys(account.id, { limit: 10, before: last.createdAt, beforeId: last.id });
      expect(ids([...first, ...second])).toEqual(ids(expected));

      expect(ids(await repository.listKeys(other.id, { limit: 100 }))).toEqual([foreign.id]);
      expect(await repository.listKeys("acct_missing", { limit: 100 })).toEqual([]);
      expect(await repository.listKeys(account.id, { limit: 0 })).toEqual([]);
    });
  });
}
