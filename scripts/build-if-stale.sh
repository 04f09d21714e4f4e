#!/usr/bin/env bash
# `npm run build`, unless dist/ was built from exactly these sources: the stamp dist/.build-stamp holds
# the list of source files (path, size, mtime) and the Node and TypeScript versions it was built with,
# and no source may be newer than it. Any difference, a missing stamp or a missing output rebuilds.
set -euo pipefail
cd "$(dirname "$0")/.."
STAMP=dist/.build-stamp
sources() {
  find src console -type f -not -path 'console/node_modules/*' -printf '%p %s %T@\n' | LC_ALL=C sort
  ls -l --time-style=+%s tsconfig.json console/tsconfig.json package.json package-lock.json 2>/dev/null | awk '{print $NF, $5, $6}'
  node --version
  node -p 'require("typescript/package.json").version' 2>/dev/null || true
}
wanted="$(sources | sha256sum | cut -c1-64)"
if [ -f "$STAMP" ] && [ -f dist/cli/main.js ] && [ -f dist/console/index.html ] && [ "$(cat "$STAMP")" = "$wanted" ] \
  && [ -z "$(find src console tsconfig.json console/tsconfig.json package.json package-lock.json -newer "$STAMP" -print -quit 2>/dev/null)" ]; then
  echo "dist/ is up to date with the sources (dist/.build-stamp): no rebuild"
  exit 0
fi
rm -f "$STAMP"
npm run build
echo "$wanted" > "$STAMP"
