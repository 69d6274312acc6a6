#!/usr/bin/env bash
# Installs the coding-agent CLIs that the tests in this folder drive (Claude Code, Codex CLI: ~640 MB)
# from this folder's own lock file, once; the gateway's `npm ci` does not install them.
# Under CI=true a failed install fails the run; elsewhere the CLI tests are skipped with a warning.
set -uo pipefail
cd "$(dirname "$0")"
stamp=node_modules/.installed-lock
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -x node_modules/.bin/claude ] && [ -x node_modules/.bin/codex ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
echo "e2e-cli: installing Claude Code and Codex CLI into test/e2e-cli/node_modules"
if npm ci --no-audit --no-fund --loglevel=error; then
  echo "$want" > "$stamp"
  exit 0
fi
if [ "${CI:-}" = "true" ]; then
  echo "e2e-cli: install failed" >&2
  exit 1
fi
echo "e2e-cli: install failed; the Claude Code and Codex tests will be skipped" >&2
exit 0
