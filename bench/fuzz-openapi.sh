#!/usr/bin/env bash
# Schema fuzzing of the running server's OpenAPI document with schemathesis (not part of CI).
#
#   bash bench/fuzz-openapi.sh [max-examples per operation, default 30]
#
# Creates a Python venv with a pinned schemathesis under ~/.cache/switchyard/fuzz (outside the
# repo), starts a server on a temporary data dir with a fresh key, runs `st run` against
# /openapi.json with the key in the Authorization header (checks: not_a_server_error and
# openai_error_shape from bench/fuzz/openai_hooks.py), and prints the requests sent, the 5xx count
# and the error bodies not in the OpenAI shape. The figures land in bench/results/fuzz-openapi-*.json.
set -euo pipefail
cd "$(dirname "$0")/.."
SCHEMATHESIS_VERSION=4.32.5
EXAMPLES="${1:-30}"
MODEL="${FUZZ_MODEL:-HuggingFaceTB/SmolLM2-135M-Instruct}"
VENV="${SWITCHYARD_FUZZ_VENV:-$HOME/.cache/switchyard/fuzz/venv-$SCHEMATHESIS_VERSION}"
if ! [ -x "$VENV/bin/st" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet "schemathesis==$SCHEMATHESIS_VERSION"
fi

DATA="$(mktemp -d -t switchyard-fuzz-XXXXXX)"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$DATA"
}
trap cleanup EXIT

KEY="$(node bin/switchyard.js keys create --account fuzz --data-dir "$DATA" | tail -n 1 | tr -d '[:space:]')"
node bin/switchyard.js serve --port 0 --data-dir "$DATA" --models "$MODEL" > "$DATA/server.log" 2>&1 &
SERVER_PID=$!
URL=""
for _ in $(seq 1 240); do
  if [ -f "$DATA/server.json" ]; then
    URL="$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).url)' "$DATA/server.json")"
    if curl -sf "$URL/health" > /dev/null; then break; fi
  fi
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then cat "$DATA/server.log"; exit 1; fi
  sleep 0.5
done
[ -n "$URL" ] || { echo "the server did not start"; cat "$DATA/server.log"; exit 1; }

mkdir -p bench/results
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
STATS="bench/results/fuzz-openapi-$STAMP.json"
echo "Fuzzing $URL/openapi.json ($EXAMPLES examples per operation, schemathesis $SCHEMATHESIS_VERSION)"
set +e
PYTHONPATH="bench/fuzz" SCHEMATHESIS_HOOKS=openai_hooks FUZZ_STATS="$STATS" "$VENV/bin/st" run "$URL/openapi.json" \
  --header "Authorization: Bearer $KEY" \
  --checks not_a_server_error,openai_error_shape \
  --max-examples "$EXAMPLES" --workers 1 --request-timeout 120 --seed 11 \
  --continue-on-failure --no-color --report junit --report-dir "$DATA/report" > "$DATA/st.log" 2>&1
ST_EXIT=$?
set -e
tail -n 40 "$DATA/st.log"
node -e '
const s = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
console.log("");
console.log("| requests sent | 5xx | errors not in the OpenAI shape |");
console.log("|---|---|---|");
console.log(`| ${s.requests} | ${s.server_error_count ?? 0} | ${s.not_openai_shape_count ?? 0} |`);
console.log("statuses:", JSON.stringify(s.status));
for (const e of [...s.server_errors, ...s.not_openai_shape]) console.log(`  ${e.status} ${e.method} ${e.path} ${e.detail ?? ""} ${e.body.slice(0, 160)}\n    sent: ${e.sent ?? ""}`);
' "$STATS"
# The server's own account of each 5xx (its stack), for the first few.
grep -m 5 '"unhandled error"' "$DATA/server.log" | cut -c1-1500 || true
echo "figures: $STATS (schemathesis exit $ST_EXIT)"
