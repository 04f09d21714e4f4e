import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

/**
 * Builds the console into dist/console, which the server serves under /console/. Everything is
 * bundled (Preact, Chart.js): the pages fetch nothing but the server's own API at run time.
 */
export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "/console/",
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: {
    outDir: fileURLToPath(new URL("../dist/console", import.meta.url)),
    emptyOutDir: true,
    // No inline assets: the Content-Security-Policy allows only files from the server itself.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 600,
  },
});
