#!/usr/bin/env bash
# Packs what a Linux x64 machine with no network needs to run the worker-scaling bench (bench/workers.ts):
#
#   bin/bun.xz     this checkout's Bun binary (xz -9)
#   bin/wrk        wrk (installed here with apt-get when missing), run through a wrapper that finds its
#                  libraries in lib/ (those of `ldd wrk` that are not glibc's; lib.tar.xz, unpacked on the machine)
#   repo.tar.xz    the committed tree (git archive HEAD; its commit in COMMIT) with node_modules:
#                  the production dependencies plus autocannon (bench/lib.ts imports it), as package-lock.json
#                  resolves them; not the Bun package (bin/bun.xz is it), TypeScript or type packages
#   bin/redis-server  Redis (when installed here), with its libraries in lib/ as wrk's: for goal 4 of the
#                  performance issue (rate limits counted in Redis) on the machine
#   run-on-machine.sh
#
#   bash bench/carry.sh [OUT.tar]      # default .tmp/workers-bench-carry.tar
#
# On the machine: tar -xf workers-bench-carry.tar && bash gateway-bench/run-on-machine.sh
# (BENCH_GOAL4=1 runs only the rate-limit comparison, in memory against Redis, with each gateway on a core of its own;
# BENCH_GOAL3=1 only the c=1 tail and c=64 streams against the bare proxy, the gateway with and without the metering
# thread (storage `sqlite_metering_thread`), each proxy on two cores of its own, then the workers' scaling with it;
# otherwise it runs `bun bench/run.ts --workers 1,2,4,8`, then the same with `--stream-chunks 20`; then, on 8 cores or more,
# the stream and c=1 ratios against the bare proxy with each proxy on a core of its own (`bench/compare.ts --pin 1`);
# BENCH_ARGS replaces all of it with one bench/run.ts run, e.g. BENCH_ARGS="--workers 1,2 --quick").
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/.tmp/workers-bench-carry.tar}
mkdir -p "$(dirname "$OUT")"
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
PKG=$STAGE/gateway-bench
REPO=$STAGE/repo
mkdir -p "$REPO" "$PKG/bin" "$PKG/lib"
cd "$ROOT"

# -- the working tree ----------------------------------------------------------------------------
# The committed tree (HEAD), not the working tree: other people's edits in progress stay out of the measurement.
git archive --format=tar HEAD | tar -xf - -C "$REPO"
git rev-parse HEAD > "$PKG/COMMIT"

# -- node_modules: the closure of the production dependencies and autocannon, from package-lock.json --
BUN_BIN=$(readlink -f node_modules/.bin/bun)
"$BUN_BIN" -e '
  const lock = JSON.parse(await Bun.file("package-lock.json").text());
  const pkg = JSON.parse(await Bun.file("package.json").text());
  // Shipped separately (bin/bun.xz) or not needed to run TypeScript with Bun.
  const skip = (name) => name === "bun" || name.startsWith("@oven/") || name === "typescript" || name.startsWith("@typescript/") || name.startsWith("@types/") || name === "bun-types";
  const found = new Set();
  // Node resolution: <from>/node_modules/<name>, then each parent directory, then the top.
  const resolve = (from, name) => {
    for (let dir = from; ; dir = dir.slice(0, Math.max(0, dir.lastIndexOf("/node_modules/")))) {
      const path = (dir ? dir + "/" : "") + "node_modules/" + name;
      if (lock.packages[path]) return path;
      if (!dir) return null;
    }
  };
  const visit = (path) => {
    if (found.has(path)) return;
    found.add(path);
    const entry = lock.packages[path];
    for (const name of Object.keys({ ...entry.dependencies, ...entry.optionalDependencies, ...entry.peerDependencies })) {
      if (skip(name)) continue;
      const dep = resolve(path, name);
      if (dep) visit(dep);
      else if (!(entry.optionalDependencies ?? {})[name] && !(entry.peerDependencies ?? {})[name]) throw new Error(`${path}: ${name} not in package-lock.json`);
    }
  };
  for (const name of [...Object.keys(pkg.dependencies), "autocannon"]) if (!skip(name)) visit(resolve("", name));
  console.log([...found].filter((p) => require("fs").existsSync(p)).sort().join("\n"));
' > "$STAGE/modules.txt"
tar -cf - -T "$STAGE/modules.txt" | tar -xf - -C "$REPO"
echo "node_modules: $(wc -l < "$STAGE/modules.txt") packages, $(du -sh "$REPO/node_modules" | cut -f1)"
tar -cf - -C "$STAGE" repo | xz -6 -T0 > "$PKG/repo.tar.xz"
echo "repo with node_modules: $(du -h "$PKG/repo.tar.xz" | cut -f1) compressed"

# -- Bun -------------------------------------------------------------------------------------------
xz -9 -T0 -c "$BUN_BIN" > "$PKG/bin/bun.xz"
echo "bun $("$BUN_BIN" --version): $(du -h "$PKG/bin/bun.xz" | cut -f1) compressed"

# -- wrk and the libraries it needs that a bare system may lack --------------------------------------
if ! command -v wrk >/dev/null; then
  echo "wrk is not installed: apt-get install -y wrk"
  DEBIAN_FRONTEND=noninteractive apt-get install -y wrk >/dev/null
fi
# Packs the installed program `name` into lib/ with the libraries `ldd` names beyond glibc, and a wrapper in bin/
# that runs it with them (libluajit, libssl, ... of the machine that packed it).
pack_binary() {
  local name=$1 path
  path=$(command -v "$name")
  cp -L "$path" "$PKG/lib/$name"
  ldd "$path" | awk '/=> \// { print $3 }' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;; # glibc: on every machine, and must match its loader
      *) cp -L "$lib" "$PKG/lib/" ;;
    esac
  done
  cat > "$PKG/bin/$name" <<EOF
#!/bin/sh
here=\$(cd "\$(dirname "\$0")/../lib" && pwd)
LD_LIBRARY_PATH="\$here\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$here/$name" "\$@"
EOF
  chmod +x "$PKG/bin/$name"
}
pack_binary wrk

# -- redis-server, the same way (optional: goal 4 is skipped on the machine without it) -----------------------
if command -v redis-server >/dev/null; then pack_binary redis-server; fi

# The libraries compressed (the device tool carries 64 MiB in all, the working tree included); run-on-machine.sh
# unpacks them first.
tar -cf - -C "$PKG" lib | xz -9 -T0 > "$PKG/lib.tar.xz"
rm -rf "$PKG/lib"

# -- the script that runs on the machine ----------------------------------------------------------------
cat > "$PKG/run-on-machine.sh" <<'EOF'
#!/usr/bin/env bash
# Unpacks Bun, then runs the worker-scaling bench twice (short answers; 20-chunk streams). Output: the tables on
# stdout, bench/results-workers.json of each run copied to $OUT (or this directory) as results-workers*.json.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
[ -d "$HERE/lib" ] || xz -d -c "$HERE/lib.tar.xz" | tar -xf - -C "$HERE"
[ -x "$HERE/bin/bun" ] || xz -d -c "$HERE/bin/bun.xz" > "$HERE/bin/bun"
[ -d "$HERE/repo" ] || xz -d -c "$HERE/repo.tar.xz" | tar -xf - -C "$HERE"
chmod +x "$HERE/bin/bun"
export PATH="$HERE/bin:$PATH"
DEST=${OUT:-$HERE}
cd "$HERE/repo"
echo "commit $(cat "$HERE/COMMIT"), bun $(bun --version), wrk: $(wrk -v 2>&1 | head -1), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
if [ -n "${BENCH_GOAL4:-}" ]; then
  # Goal 4: the plugins' key (RPM/TPM and a key budget) counted in memory and in Redis (on the last core).
  command -v redis-server >/dev/null || { echo "no redis-server packed"; exit 1; }
  taskset -c "$(($(nproc) - 1))" redis-server --port 6379 --bind 127.0.0.1 --save "" --appendonly no --daemonize yes
  sleep 0.5
  bun bench/compare.ts . .::REDIS_URL=redis://127.0.0.1:6379 --key-limits --pin 1 --rounds "${ROUNDS:-3}" --seconds 3
  exit 0
fi
if [ -n "${BENCH_GOAL3:-}" ]; then
  # Goal 3: the c=1 tail with the group commit on the event loop and on the metering thread (its own core: --pin 2).
  for args in "--concurrency 1" "--stream --words 20"; do
    # shellcheck disable=SC2086
    bun bench/compare.ts . --bare .::SQLITE_METERING_THREAD=true --pin 2 --rounds "${ROUNDS:-4}" --seconds 3 $args
  done
  # Goal 1 with each worker's group commit on its own thread (no worker's event loop waits for the file's write lock).
  SQLITE_METERING_THREAD=true bun bench/run.ts --workers 1,2,4,8
  cp bench/results-workers.json "$DEST/results-workers-thread.json"
  exit 0
fi
if [ -n "${BENCH_ARGS:-}" ]; then
  # shellcheck disable=SC2086
  bun bench/run.ts $BENCH_ARGS
  cp bench/results-workers.json "$DEST/results-workers.json"
  exit 0
fi
bun bench/run.ts --workers 1,2,4,8
cp bench/results-workers.json "$DEST/results-workers.json"
bun bench/run.ts --workers 1,2,4,8 --stream-chunks 20
cp bench/results-workers.json "$DEST/results-workers-chunks20.json"
[ "$(nproc)" -ge 8 ] || exit 0
# Goals 2 and 3 with each proxy on one core of its own (two for the last runs: the bare proxy's fetch thread, the
# gateway's threads); the stream runs add the floor proxies (bench/floor-proxy.ts: what reading the answer costs
# alone). The c=1 runs add the gateway with metering and the plugins that need it off, to show what sets
# its tail.
NO_METERING=$(mktemp --suffix=.yaml)
awk -v off="metering budget rate-limit payments payments-stripe payments-usdt-tron cost-api dashboard" 'BEGIN { split(off, a, " "); for (i in a) o[a[i]] = 1 }
  /^  [a-z-]+:/ { n = $1; sub(":", "", n); cur = (n in o) }
  cur && /^    enabled:/ { sub(/enabled:.*/, "enabled: false") } { print }' plugins-config.yaml > "$NO_METERING"
for args in "--floors --stream --words 20" "--floors --stream --words 300" "" ". .:$NO_METERING --concurrency 1" "--pin 2 --stream --words 20" ". .:$NO_METERING --concurrency 1 --pin 2"; do
  # shellcheck disable=SC2086
  case "$args" in .*) bun bench/compare.ts --bare --pin 1 --rounds 4 --seconds 3 $args ;; *) bun bench/compare.ts . --bare --pin 1 --rounds 4 --seconds 3 $args ;; esac
done
EOF
chmod +x "$PKG/run-on-machine.sh"

tar -cf "$OUT" -C "$STAGE" gateway-bench
echo "wrote $OUT ($(du -h "$OUT" | cut -f1))"
