/**
 * Module hooks for the services' TypeScript (./register.mjs registers them). Each .ts module is
 * compiled when loaded by esbuild's transform with the project's tsconfig, as tsx compiles it, but
 * without `keepNames`: tsx wraps every named function made at run time in `__name(fn, "name")`,
 * an `Object.defineProperty` per closure, which cost ~10 % of the CPU of a small GraphQL request
 * (docs/performance.md, "HTTP path"). Nothing is minified, so functions keep their names anyway.
 * As under tsx, a relative `./x.js` specifier finds `./x.ts` (the sources import each other so).
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { transformSync } from "esbuild";

const tsconfigRaw = readFileSync(new URL("../../tsconfig.json", import.meta.url), "utf8");
const RELATIVE = /^(\.{1,2}\/|\/|file:)/;

export async function resolve(specifier, context, nextResolve) {
  try {
    return await nextResolve(specifier, context);
  } catch (error) {
    if (error?.code !== "ERR_MODULE_NOT_FOUND" || !specifier.endsWith(".js") || !RELATIVE.test(specifier)) throw error;
    return nextResolve(`${specifier.slice(0, -".js".length)}.ts`, context);
  }
}

export async function load(url, context, nextLoad) {
  if (!url.startsWith("file:") || !url.endsWith(".ts")) return nextLoad(url, context);
  const path = fileURLToPath(url);
  const { code } = transformSync(readFileSync(path, "utf8"), {
    loader: "ts",
    format: "esm",
    target: `node${process.versions.node}`,
    sourcemap: "inline",
    sourcefile: path,
    tsconfigRaw,
  });
  return { format: "module", source: code, shortCircuit: true };
}
