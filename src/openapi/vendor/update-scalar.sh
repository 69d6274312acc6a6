#!/usr/bin/env bash
# Refreshes the vendored Scalar API reference bundle (the /swagger page's only script).
# Usage: bash src/openapi/vendor/update-scalar.sh 1.72.1
# Scalar's package pulls ~290 MB of Vue dependencies into node_modules for one 4 MB browser file, so the
# gateway keeps that file here, gzipped, instead of depending on the package.
set -euo pipefail
version="${1:?usage: update-scalar.sh <version of @scalar/api-reference>}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "@scalar/api-reference@$version" >/dev/null && tar -xzf ./*.tgz)
gzip -9 -n -c "$work/package/dist/browser/standalone.js" > "$here/scalar-standalone.js.gz"
cp "$work/package/LICENSE" "$here/SCALAR-LICENSE" 2>/dev/null || true
sha=$(sha256sum "$work/package/dist/browser/standalone.js" | cut -d' ' -f1)
printf '{ "package": "@scalar/api-reference", "version": "%s", "file": "dist/browser/standalone.js", "sha256": "%s" }\n' "$version" "$sha" > "$here/scalar.json"
echo "vendored @scalar/api-reference $version ($sha)"
