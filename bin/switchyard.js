#!/usr/bin/env node
// node-llama-cpp runs every llama_decode on libuv's thread pool. With the default 4 pool threads the
// decodes hop from thread to thread and each one ran about half as fast on 2 cores (measured: 16
// sequences 78 -> 131 tok/s, one sequence 42 -> 80); with one pool thread every decode starts from
// the same thread. libuv reads this once, at its first use, so it is set before anything is loaded.
process.env.UV_THREADPOOL_SIZE ??= "1";
await import("../dist/cli/main.js");
