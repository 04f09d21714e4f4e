#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` and `llama-batched-bench` (the step loop's ceiling: decode
# throughput of N sequences with no server around it) from the llama.cpp source that the installed node-llama-cpp
# ships (node_modules/node-llama-cpp/llama/gitRelease.bundle), so the peer runs the same llama.cpp
# release as our engine. Built the way node-llama-cpp builds its prebuilt CPU libraries (not native:
# GGML_NATIVE=OFF, GGML_BACKEND_DL=ON, GGML_CPU_ALL_VARIANTS=ON), so at run time ggml picks the same
# CPU variant (haswell, zen4, sapphirerapids with AMX, ...) for both sides and the peer runs as its
# users run it, with no handicap flag. Release, llama-server and llama-batched-bench only. The build
# lives in a cache outside the repository and is skipped when the binaries are already there.
#
#   bash bench/peers/build-llama-server.sh            # prints the path of the llama-server binary
#   SWITCHYARD_PEERS_DIR=/elsewhere JOBS=4 bash bench/peers/build-llama-server.sh
#   SWITCHYARD_PEER_CPU_VARIANT=zen4 bash bench/peers/build-llama-server.sh
#
# SWITCHYARD_PEER_CPU_VARIANT builds one CPU variant only, with the feature flags ggml's own
# CMakeLists gives that variant (so the kernels are the ones the all-variants build would pick on
# this CPU): about a fifth of the build time. Name the variant ggml loads for our engine here (the
# libggml-cpu-<variant>.so in a shard worker's /proc/<pid>/maps).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
llama_dir="$repo_root/node_modules/node-llama-cpp/llama"
bundle="$llama_dir/gitRelease.bundle"
[[ -f "$bundle" ]] || { echo "no $bundle: run npm install first" >&2; exit 1; }

# The release tag node-llama-cpp records for its bundled llama.cpp.
tag="$(node -e 'const f=process.argv[1];const j=JSON.parse(require("fs").readFileSync(f,"utf8"));process.stdout.write(j.tag??j.release)' "$llama_dir/llama.cpp.info.json")"
peers_dir="${SWITCHYARD_PEERS_DIR:-$HOME/.cache/switchyard/peers}"
variant="${SWITCHYARD_PEER_CPU_VARIANT:-}"
built() { [[ -x "$1/build/bin/llama-server" && -x "$1/build/bin/llama-batched-bench" ]]; }
if [[ -z "$variant" ]]; then
  dest="$peers_dir/llama.cpp-$tag-all-variants"
  # A one-variant build serves when the all-variants one is not there.
  if ! built "$dest"; then
    for candidate in "$peers_dir/llama.cpp-$tag"-cpu-*; do built "$candidate" && dest="$candidate" && break; done
  fi
else
  dest="$peers_dir/llama.cpp-$tag-cpu-$variant"
fi
binary="$dest/build/bin/llama-server"

if built "$dest"; then
  echo "$binary"
  exit 0
fi

[[ -z "${SWITCHYARD_PEER_CHECK_ONLY:-}" ]] || { echo "not built" >&2; exit 1; }
mkdir -p "$peers_dir"
if [[ ! -d "$dest/src/.git" ]]; then
  rm -rf "$dest/src"
  git clone --quiet "$bundle" "$dest/src" >&2
fi
head_commit="$(git -C "$dest/src" rev-parse HEAD)"
echo "llama.cpp $tag ($head_commit) -> $dest" >&2

cpu_flags=(-DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON)
if [[ -n "$variant" ]]; then
  features="$(sed -n "s/^ *ggml_add_cpu_backend_variant(${variant} *\(.*\))/\1/p" "$dest/src/ggml/src/CMakeLists.txt" | head -n1)"
  grep -q "ggml_add_cpu_backend_variant(${variant}[ )]" "$dest/src/ggml/src/CMakeLists.txt" \
    || { echo "no CPU variant '$variant' in ggml/src/CMakeLists.txt" >&2; exit 1; }
  cpu_flags=(-DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=OFF)
  for feature in $features; do cpu_flags+=("-DGGML_${feature}=ON"); done
  echo "CPU variant $variant: ${cpu_flags[*]}" >&2
fi

start=$(date +%s)
# No web UI (it would be fetched from the network or built with npm), no HTTPS, no CURL.
nice -n 19 cmake -S "$dest/src" -B "$dest/build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=OFF \
  "${cpu_flags[@]}" \
  -DLLAMA_CURL=OFF \
  -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=ON \
  -DBUILD_SHARED_LIBS=ON >&2
nice -n 19 cmake --build "$dest/build" --config Release --target llama-server llama-batched-bench -j "${JOBS:-2}" >&2
seconds=$(( $(date +%s) - start ))

cat > "$dest/build-info.json" <<JSON
{"tag": "$tag", "commit": "$head_commit", "cmake": "GGML_NATIVE=OFF ${cpu_flags[*]}", "build_seconds": $seconds, "built_at": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"}
JSON
echo "built in ${seconds}s" >&2
echo "$binary"
