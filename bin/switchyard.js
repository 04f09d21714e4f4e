#!/usr/bin/env node
await import("../dist/cli/main.js");
