/**
 * The dashboard's build (`npm run build:dashboard` → dashboard/dist, served by the API process at
 * /dashboard/) and its dev server (`npm run dev:dashboard`: hot reload on :5173, forwarding the
 * API's paths to a running system, API_URL or http://127.0.0.1:4000).
 */
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

const api = process.env.API_URL ?? "http://127.0.0.1:4000";

export default defineConfig({
  root: import.meta.dirname,
  base: "/dashboard/",
  plugins: [react()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    // The whole app is one first-load bundle (plus CSS): the bench measures it against 250 kB gzip.
    chunkSizeWarningLimit: 800,
  },
  server: {
    host: "127.0.0.1",
    port: 5173,
    strictPort: true,
    proxy: {
      "/graphql": { target: api, changeOrigin: false },
      "/dashboard/api": { target: api, changeOrigin: false },
    },
  },
});
