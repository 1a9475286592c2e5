import { defineConfig } from "vitest/config";
import { resolve } from "node:path";

// Two pages: the main window and the tray's quick-ask window. No remote assets; the app's CSP
// allows only what the bundle itself serves.
export default defineConfig({
  clearScreen: false,
  build: {
    target: "es2022",
    outDir: "dist",
    emptyOutDir: true,
    rollupOptions: {
      input: {
        main: resolve(__dirname, "index.html"),
        quick: resolve(__dirname, "quick.html"),
      },
    },
  },
  test: {
    environment: "jsdom",
    globals: true,
    include: ["src/**/*.test.ts"],
  },
});
