/**
 * Runs the services' TypeScript: `node --import ./scripts/typescript/register.mjs <entry>.ts`.
 * Registers ./hooks.mjs (compiled on load by esbuild, as tsx does, without tsx's name-keeping
 * wrappers: see there) and maps stack traces to the .ts sources.
 */
import { register } from "node:module";

process.setSourceMapsEnabled(true);
register("./hooks.mjs", import.meta.url);
