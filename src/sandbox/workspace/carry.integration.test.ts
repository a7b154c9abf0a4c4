import { execFileSync } from "node:child_process";
import {
  chmod,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readlink,
  rm,
  symlink,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { SandboxStartError } from "../../common/index.js";
import { testSandboxSpec } from "../../../test/support/sandbox-spec.js";
import type { SandboxSpec } from "../spec.js";
import { patchOf } from "../../../test/support/inspect-copy.js";
import { carryInto } from "./carry.js";
import { releaseWorkspaceDisksBelow } from "./disk-budget.js";
import { privateWorkspacePath } from "./paths.js";
import { ensurePrivateWorkspace } from "./private-workspace.js";

let root: string;
let stateDirectory: string;
let workspace: string;

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "cordon-carry-"));
  stateDirectory = path.join(root, "home");
  workspace = path.join(root, "project");
  await mkdir(workspace);
});

afterEach(async () => {
  // As root the carried directories are overlays (carry-layers.ts): unmounted before deletion.
  await releaseWorkspaceDisksBelow(root);
  await rm(root, { recursive: true, force: true });
});

function seededSpec(carry: string[]): SandboxSpec {
  const spec = testSandboxSpec("carry", { spec: { seed: true, agentWorkspace: workspace, carry } });
  return { ...spec, privateWorkspace: privateWorkspacePath(stateDirectory, spec.containerName) };
}

const git = (...args: string[]): string =>
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@e", ...args], {
    cwd: workspace,
    encoding: "utf8",
  });

/** An npm project as `npm ci` leaves it: sources in git, node_modules installed and ignored. */
async function makeNpmProject(options: { ignoreNodeModules: boolean }): Promise<void> {
  git("init", "-q");
  await writeFile(path.join(workspace, "package.json"), '{ "scripts": { "test": "mocha" } }\n');
  await mkdir(path.join(workspace, "lib", "node_modules"), { recursive: true });
  await writeFile(path.join(workspace, "lib", "index.js"), "module.exports = 1;\n");
  // Anchoring: only the top-level node_modules is carried, this tracked one is the project's.
  await writeFile(path.join(workspace, "lib", "node_modules", "local.js"), "exports.x = 1;\n");
  if (options.ignoreNodeModules) {
    await writeFile(path.join(workspace, ".gitignore"), "/node_modules/\n");
  }
  git("add", "-A");
  git("commit", "-qm", "project");
  const bin = path.join(workspace, "node_modules", "mocha", "bin");
  await mkdir(bin, { recursive: true });
  await writeFile(path.join(bin, "mocha.js"), "#!/usr/bin/env node\nconsole.log('mocha');\n");
  await chmod(path.join(bin, "mocha.js"), 0o755);
  await mkdir(path.join(workspace, "node_modules", ".bin"));
  await symlink("../mocha/bin/mocha.js", path.join(workspace, "node_modules", ".bin", "mocha"));
}

/** Regular files below `directory` (links not followed) that contain `text`. */
function filesContaining(directory: string, text: string): string[] {
  try {
    return execFileSync("grep", ["-rlF", text, directory], { encoding: "utf8" })
      .split("\n")
      .filter(Boolean);
  } catch {
    return []; // grep exits 1 when nothing matches
  }
}

describe("carrying ignored paths into the seeded copy", () => {
  it("copies node_modules in, owned by the container's user, links as links, and says how long it took", async () => {
    await makeNpmProject({ ignoreNodeModules: true });
    const result = await ensurePrivateWorkspace(seededSpec(["node_modules"]), { stateDirectory });
    const copy = result.path;

    const mocha = await lstat(path.join(copy, "node_modules", "mocha", "bin", "mocha.js"));
    expect(mocha.mode & 0o777).toBe(0o755);
    if (process.getuid?.() === 0) expect([mocha.uid, mocha.gid]).toEqual([1000, 1000]);
    expect(await readlink(path.join(copy, "node_modules", ".bin", "mocha"))).toBe(
      "../mocha/bin/mocha.js",
    );
    expect(result.seed?.carried).toMatchObject({
      paths: ["node_modules"],
      files: 1,
      symlinks: 1,
    });
    // As root, layered over a snapshot of the copy's own (carry-layers.ts); else copied.
    expect(["reflink", "copy", "layer"]).toContain(result.seed?.carried?.method);
    expect(result.seed?.carried?.durationMs).toBeGreaterThanOrEqual(0);
  });

  it.each([
    ["named by the project's .gitignore", true],
    ["not ignored by the project at all", false],
  ])(
    "leaves carried paths out of the diff (%s) while the project's own files are in it",
    async (_, ignoreNodeModules) => {
      await makeNpmProject({ ignoreNodeModules });
      const { path: copy } = await ensurePrivateWorkspace(seededSpec(["node_modules"]), {
        stateDirectory,
      });
      // What an agent's test run does to dependencies (vite's .vite-temp), and a real fix.
      await mkdir(path.join(copy, "node_modules", ".vite-temp"));
      await writeFile(path.join(copy, "node_modules", ".vite-temp", "config.mjs"), "export {};\n");
      await writeFile(path.join(copy, "node_modules", "mocha", "bin", "mocha.js"), "changed\n");
      await rm(path.join(copy, "node_modules", ".bin"), { recursive: true });
      await writeFile(path.join(copy, "lib", "index.js"), "module.exports = 2;\n");
      await writeFile(path.join(copy, "lib", "node_modules", "local.js"), "exports.x = 2;\n");

      const patch = (await patchOf(copy)).toString("utf8");
      const files = [...patch.matchAll(/^diff --git a\/(\S+)/gm)].map((m) => m[1]);
      expect(files).toEqual(["lib/index.js", "lib/node_modules/local.js"]);
    },
  );

  it("never leaves the workspace for a hostile carried tree: links stay links, FIFOs and parents that lead out are skipped", async () => {
    await makeNpmProject({ ignoreNodeModules: true });
    const outside = path.join(root, "outside");
    await mkdir(outside);
    await writeFile(path.join(outside, "id_rsa"), "PRIVATE KEY\n");
    const modules = path.join(workspace, "node_modules");
    await symlink(outside, path.join(modules, "evil-dir"));
    await symlink("/etc/passwd", path.join(modules, "evil-file"));
    execFileSync("mkfifo", [path.join(modules, "pipe")]);
    // A carried path whose parent is a link out of the workspace.
    await symlink(outside, path.join(workspace, "vendor"));

    const warningsSeen: string[] = [];
    const result = await ensurePrivateWorkspace(seededSpec(["node_modules", "vendor/id_rsa"]), {
      stateDirectory,
    });
    warningsSeen.push(...result.warnings);
    const copy = result.path;

    expect((await lstat(path.join(copy, "node_modules", "evil-dir"))).isSymbolicLink()).toBe(true);
    expect(await readlink(path.join(copy, "node_modules", "evil-file"))).toBe("/etc/passwd");
    await expect(lstat(path.join(copy, "node_modules", "pipe"))).rejects.toThrow(/ENOENT/);
    // The seed itself keeps the untracked link `vendor` as a link; nothing behind it came in.
    expect((await lstat(path.join(copy, "vendor"))).isSymbolicLink()).toBe(true);
    expect(filesContaining(copy, "PRIVATE KEY")).toEqual([]);
    expect(warningsSeen.join("\n")).toMatch(
      /carrying skipped 2 entries: .*node_modules\/pipe \(not a file, directory or symlink\).*vendor\/id_rsa \(a parent directory leads outside the workspace\)/,
    );
    // The inspector's git reading the copy for a diff does not descend into what was carried.
    expect((await patchOf(copy)).length).toBe(0);
  });

  it("stops before copying past the disk budget, naming the fix", async () => {
    await makeNpmProject({ ignoreNodeModules: true });
    await writeFile(path.join(workspace, "node_modules", "huge.bin"), Buffer.alloc(64 * 1024));
    const target = path.join(root, "seed");
    await mkdir(target);
    const error = await carryInto({
      sourceRoot: workspace,
      targetRoot: target,
      paths: ["node_modules"],
      owner: undefined,
      exclude: [],
      byteLimit: 16 * 1024,
      warnings: [],
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxStartError);
    expect((error as SandboxStartError).message).toMatch(
      /the carried paths \(node_modules\) do not fit the private workspace's disk budget: node_modules\/huge\.bin would take them past/,
    );
    expect((error as SandboxStartError).fix).toMatch(/raise sandbox\.disk.*carry less/);
    await expect(readFile(path.join(target, "node_modules", "huge.bin"))).rejects.toThrow(/ENOENT/);
  });
});
