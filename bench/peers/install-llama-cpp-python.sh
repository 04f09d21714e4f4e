#!/usr/bin/env bash
# Installs llama-cpp-python's OpenAI-compatible server (from PyPI; pip compiles its vendored
# llama.cpp, CPU, native) into a venv in a cache outside the repository, once.
#
#   bash bench/peers/install-llama-cpp-python.sh     # prints the venv's python
set -euo pipefail
version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
peers_dir="${SWITCHYARD_PEERS_DIR:-$HOME/.cache/switchyard/peers}"
venv="$peers_dir/llama-cpp-python-$version"
if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi
[[ -z "${SWITCHYARD_PEER_CHECK_ONLY:-}" ]] || { echo "not built" >&2; exit 1; }
mkdir -p "$peers_dir"
python3 -m venv "$venv"
start=$(date +%s)
CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_CURL=OFF" CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-2}" \
  nice -n 19 "$venv/bin/pip" install --quiet "llama-cpp-python[server]==$version" >&2
echo "installed llama-cpp-python $version in $(( $(date +%s) - start ))s" >&2
echo "$venv/bin/python"
