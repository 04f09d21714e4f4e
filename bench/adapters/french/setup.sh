#!/usr/bin/env bash
# The Python environment the French adapter's recipe trains in: .cache/py-train (CPU torch, Hugging
# Face transformers and PEFT, gguf-py to read the served GGUF). Idempotent: a complete venv is kept.
# torch is installed first and alone, as its CPU build (2.13.0+cpu), so that transformers and PEFT
# find it there and pull no CUDA build.
set -euo pipefail
cd "$(dirname "$0")/../../.."
venv=.cache/py-train
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import torch, transformers, peft, safetensors, gguf' 2>/dev/null; then
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet torch==2.13.0
"$venv/bin/pip" install --quiet transformers==5.24.0 peft==0.21.2 safetensors==0.8.0 gguf==0.19.0 numpy==2.4.6
