import { describe, expect, it } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, extname, join, relative, resolve, sep } from "node:path";

/**
 * The documentation stays inside the repository: no Markdown file or source comment points at notes that are not
 * in it (a sibling checkout, an absolute path, sections of an external reference), every relative link of a
 * Markdown file reaches a file (and a heading) that exists, and the README stays the short page a user reads first.
 */

const ROOT = resolve(import.meta.dir, "../..");
const SELF = relative(ROOT, import.meta.path);
const README_MAX_BYTES = 12 * 1024;

/** Tracked files (git), or every file outside node_modules and .git when git is not there. */
function repositoryFiles(): string[] {
  const git = Bun.spawnSync(["git", "ls-files", "-z"], { cwd: ROOT, stdout: "pipe", stderr: "ignore" });
  if (git.exitCode === 0) {
    return git.stdout.toString().split("\0").filter((file) => file !== "" && existsSync(join(ROOT, file)));
  }
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
      if (entry.name === "node_modules" || entry.name === ".git") continue;
      const path = dir ? `${dir}/${entry.name}` : entry.name;
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) files.push(path);
    }
  };
  walk("");
  return files;
}

const files = repositoryFiles();
const markdown = files.filter((file) => file.endsWith(".md"));
const SOURCE_EXTENSIONS = new Set([".ts", ".tsx", ".js", ".mjs", ".yaml", ".yml", ".toml", ".sh"]);
const sources = files.filter((file) => SOURCE_EXTENSIONS.has(extname(file)) && file !== SELF);

const SIBLING_CHECKOUT = "a path into a sibling checkout";

/** `../shared/` that resolves, from the file's folder, to a folder of this repository (src/plugins/storage/shared/). */
function insideRepository(file: string, path: string): boolean {
  const target = resolve(ROOT, dirname(file), path);
  return target.startsWith(ROOT + sep) && existsSync(target);
}

/** Text that points outside the repository, wherever it appears (links, prose, code blocks, comments). */
const OUTSIDE: { pattern: RegExp; why: string }[] = [
  { pattern: /(?:\.\.\/)+shared\//, why: SIBLING_CHECKOUT },
  { pattern: /(?:^|[\s`'"(=])\/(?:work|home|Users|root|mnt)\//, why: "an absolute path on someone's machine" },
  { pattern: /\bshared\/(?:reference|spec|design|hooks)\//, why: "notes that are not in the repository" },
  { pattern: /\b(?:catalog-prices|service-spec)\.md\b/, why: "an external reference file" },
  { pattern: /\bwire reference\b/i, why: "a section of an external wire-format reference (cite docs/wire-formats.md)" },
  { pattern: /\bpitfall F\.\d/i, why: "a pitfall of an external reference (cite docs/wire-formats.md)" },
];

/** A section number of an external note (`E.9.1`, `F.24`, `B.7`), as comments used to cite them. */
const SECTION_CITATION = /(?<![\w./-])[A-H]\.\d{1,2}(?:\.\d{1,2})?(?![\w.])/;

interface Finding {
  file: string;
  line: number;
  text: string;
  why: string;
}

function lineOf(text: string, index: number): number {
  return text.slice(0, index).split("\n").length;
}

function read(file: string): string {
  return readFileSync(join(ROOT, file), "utf8");
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, each space a hyphen; repeats get -1, -2, … */
function anchorsOf(markdownText: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of withoutFences(markdownText).split("\n")) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const text = heading[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, "$1");
    const base = text.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

/** The text with fenced code blocks blanked (line numbers kept), so their contents are not read as links or headings. */
function withoutFences(text: string): string {
  return text.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, (block) => block.replace(/[^\n]/g, " "));
}

const anchorCache = new Map<string, Set<string>>();
function anchorsOfFile(file: string): Set<string> {
  let anchors = anchorCache.get(file);
  if (!anchors) {
    anchors = anchorsOf(read(file));
    anchorCache.set(file, anchors);
  }
  return anchors;
}

/** Checks a repository path with an optional #anchor, relative to the repository root. */
function checkTarget(target: string, anchor: string | undefined): string | undefined {
  const absolute = resolve(ROOT, target);
  if (absolute !== ROOT && !absolute.startsWith(ROOT + sep)) return "leaves the repository";
  if (!existsSync(absolute)) return "no such file";
  if (anchor && statSync(absolute).isFile() && absolute.endsWith(".md") && !anchorsOfFile(relative(ROOT, absolute)).has(anchor)) {
    return `no heading with anchor #${anchor}`;
  }
  return undefined;
}

function outsideReferences(file: string, text: string): Finding[] {
  const findings: Finding[] = [];
  for (const { pattern, why } of OUTSIDE) {
    const global = new RegExp(pattern.source, pattern.flags.includes("g") ? pattern.flags : pattern.flags + "g");
    for (const match of text.matchAll(global)) {
      if (why === SIBLING_CHECKOUT && insideRepository(file, match[0].trim())) continue;
      findings.push({ file, line: lineOf(text, match.index!), text: match[0].trim(), why });
    }
  }
  return findings;
}

/** The comment text of a source line ('' when it has none): whole comment lines, or what follows ` // `. */
function commentOf(line: string, extension: string): string {
  const trimmed = line.trim();
  if ([".yaml", ".yml", ".toml", ".sh"].includes(extension)) {
    const hash = line.indexOf("#");
    return hash === -1 ? "" : line.slice(hash);
  }
  if (trimmed.startsWith("*") || trimmed.startsWith("/*") || trimmed.startsWith("//")) return trimmed;
  const inline = line.indexOf(" // ");
  return inline === -1 ? "" : line.slice(inline);
}

describe("documentation links", () => {
  it("finds the repository's Markdown and source files", () => {
    expect(markdown).toContain("README.md");
    expect(sources.length).toBeGreaterThan(50);
  });

  it("keeps README.md within 12 KB", () => {
    const size = statSync(join(ROOT, "README.md")).size;
    expect(size, `README.md is ${size} bytes; move detail to docs/`).toBeLessThanOrEqual(README_MAX_BYTES);
  });

  it("points at nothing outside the repository from a Markdown file", () => {
    const findings = markdown.flatMap((file) => outsideReferences(file, read(file)));
    expect(findings).toEqual([]);
  });

  it("points at nothing outside the repository from a source file", () => {
    const findings = sources.flatMap((file) => outsideReferences(file, read(file)));
    expect(findings).toEqual([]);
  });

  it("cites no section of an external note in a Markdown file or a source comment", () => {
    const findings: Finding[] = [];
    for (const file of [...markdown, ...sources]) {
      const extension = extname(file);
      read(file)
        .split("\n")
        .forEach((line, index) => {
          const text = extension === ".md" ? line : commentOf(line, extension);
          const match = SECTION_CITATION.exec(text);
          if (match) findings.push({ file, line: index + 1, text: match[0], why: "cite docs/ or the vendor's documentation" });
        });
    }
    expect(findings).toEqual([]);
  });

  it("links every relative Markdown link to a file (and heading) of the repository", () => {
    const findings: Finding[] = [];
    for (const file of markdown) {
      const text = read(file);
      const prose = withoutFences(text).replace(/`[^`\n]*`/g, (code) => " ".repeat(code.length));
      const links = [
        ...prose.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g),
        ...prose.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/gm),
      ];
      for (const link of links) {
        const raw = link[1]!;
        if (/^[a-z][a-z0-9+.-]*:/i.test(raw)) continue; // https:, mailto:
        const [path, anchor] = raw.split("#", 2) as [string, string | undefined];
        let why: string | undefined;
        if (path.startsWith("/")) why = "an absolute path";
        else if (path === "") why = anchor && !anchorsOfFile(file).has(anchor) ? `no heading with anchor #${anchor}` : undefined;
        else why = checkTarget(relative(ROOT, resolve(ROOT, dirname(file), decodeURI(path))), anchor);
        if (why) findings.push({ file, line: lineOf(text, link.index!), text: raw, why });
      }
    }
    expect(findings).toEqual([]);
  });

  it("names only existing documents (and headings) where a source comment cites one", () => {
    const findings: Finding[] = [];
    const cited = /\b((?:docs|bench|src|test)\/[\w./-]*?\.md)(?:#([\w-]+))?/g;
    for (const file of sources) {
      const extension = extname(file);
      read(file)
        .split("\n")
        .forEach((line, index) => {
          for (const match of commentOf(line, extension).matchAll(cited)) {
            const why = checkTarget(match[1]!, match[2]);
            if (why) findings.push({ file, line: index + 1, text: match[0], why });
          }
        });
    }
    expect(findings).toEqual([]);
  });
});
