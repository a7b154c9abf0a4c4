import { existsSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The directory of cordon's own package.json, found by walking up from this file, so it works
 * both from `src/` (tests, tsx) and from `dist/` (the installed bin).
 */
export function packageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(path.join(dir, "package.json")) && existsSync(path.join(dir, "images"))) {
      return dir;
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error("cannot find cordon's package root");
    dir = parent;
  }
}

/** The state directory: `CORDON_HOME`, default `~/.cordon`. */
export function stateDirectory(env: Readonly<Record<string, string | undefined>>): string {
  const configured = env["CORDON_HOME"];
  return configured ? path.resolve(configured) : path.join(homedir(), ".cordon");
}
