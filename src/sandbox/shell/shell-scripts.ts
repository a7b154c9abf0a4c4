import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { SandboxError, packageRoot } from "../../common/index.js";

/**
 * cordon's bash programs, each a `.sh` file under src/ that shellcheck reads (`npm run check`),
 * sent to the sandbox with every call (see `scriptInvocation`).
 *
 * Read at first use from beside the modules that send them, rather than inlined into a generated
 * TypeScript module: vitest runs the sources, where the `.sh` files are; `npm run build` (and
 * scripts/setup.sh) copies them into dist/ at the same paths, and the package ships dist/; so no
 * generated copy can go stale beside its script, and the package carries no src/. A tree
 * compiled elsewhere (the bench's dist-bench/) finds them in the checkout's src/.
 */
const scriptFiles = {
  execWrapper: "sandbox/shell/exec-wrapper.sh",
  processTable: "sandbox/shell/process-script.sh",
  fileOperations: "sandbox/docker/files/file-script.sh",
  inspectChanges: "sandbox/docker/inspector/inspect-changes.sh",
  checkpointCopy: "sandbox/docker/inspector/checkpoint-copy.sh",
  forkCopy: "sandbox/docker/inspector/fork-copy.sh",
} as const;

export type ShellScriptName = keyof typeof scriptFiles;

/** src/ or dist/: this module is at sandbox/shell/ below it. */
const moduleRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

const loaded = new Map<ShellScriptName, string>();

/** The text of one of cordon's bash programs (read once, then kept). */
export function shellScript(name: ShellScriptName): string {
  let script = loaded.get(name);
  if (script === undefined) {
    script = readScript(scriptFiles[name]);
    loaded.set(name, script);
  }
  return script;
}

/** Where each script is read from, for tests that check every one. */
export function shellScriptFiles(): ReadonlyArray<{ name: ShellScriptName; file: string }> {
  return (Object.keys(scriptFiles) as ShellScriptName[]).map((name) => ({
    name,
    file: candidates(scriptFiles[name]).find((file) => existsSync(file)) ?? "(missing)",
  }));
}

/** Beside this module first; then the checkout's src/, for a tree compiled elsewhere. */
function candidates(relative: string): string[] {
  const files = [path.join(moduleRoot, relative)];
  try {
    files.push(path.join(packageRoot(), "src", relative));
  } catch {
    // an installed package has no src/: only the copy in dist/ counts
  }
  return files;
}

function readScript(relative: string): string {
  for (const file of candidates(relative)) {
    try {
      return readFileSync(file, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
  }
  throw new SandboxError(`cordon's shell script ${path.join(moduleRoot, relative)} is missing`, {
    fix: "rebuild cordon (npm run build) or reinstall it: its package is incomplete",
  });
}
