import { execFileSync } from "node:child_process";
import {
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  readlink,
  rm,
  symlink,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";

import { requireSandboxImage } from "../../../test/support/docker.js";
import { testSandboxSpec } from "../../../test/support/sandbox-spec.js";
import type { SandboxSpec } from "../spec.js";
import { carrySnapshotPath, releaseCarryLayers } from "./carry-layers.js";
import { releaseWorkspaceDisksBelow } from "./disk-budget.js";
import { parseMountPoints } from "./mount-table.js";
import { privateWorkspacePath } from "./paths.js";
import { ensurePrivateWorkspace } from "./private-workspace.js";

// Overlays are mounted by root only; elsewhere each copy is copied (the fallback test below).
const asRoot = process.getuid?.() === 0;

let image: string;
let root: string;
let stateDirectory: string;
let workspace: string;

beforeAll(async () => {
  image = await requireSandboxImage();
});

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "cordon-carry-layers-"));
  stateDirectory = path.join(root, "home");
  workspace = path.join(root, "project");
  await mkdir(workspace);
  execFileSync("git", ["init", "-q"], { cwd: workspace });
  await writeFile(path.join(workspace, ".gitignore"), "/node_modules/\n");
  await writeFile(path.join(workspace, "index.js"), "module.exports = 1;\n");
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@e", "add", "-A"], {
    cwd: workspace,
  });
  execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "p"], {
    cwd: workspace,
  });
  const lib = path.join(workspace, "node_modules", "left-pad", "lib");
  await mkdir(lib, { recursive: true });
  await writeFile(path.join(lib, "index.js"), "module.exports = (s) => s;\n");
  await mkdir(path.join(workspace, "node_modules", ".bin"));
  await symlink("../left-pad/lib/index.js", path.join(workspace, "node_modules", ".bin", "pad"));
});

afterEach(async () => {
  await releaseWorkspaceDisksBelow(root);
  await rm(root, { recursive: true, force: true });
});

function sharedSpec(name: string, extra: Partial<SandboxSpec> = {}): SandboxSpec {
  const spec = testSandboxSpec(name, {
    spec: {
      seed: true,
      agentWorkspace: workspace,
      carry: ["node_modules"],
      carryShare: "run1",
      ...extra,
    },
  });
  return { ...spec, privateWorkspace: privateWorkspacePath(stateDirectory, spec.containerName) };
}

/** Runs `script` as the sandbox user, no capabilities, no network, with `copy` at /workspace. */
function inContainer(copy: string, script: string): string {
  return execFileSync(
    "docker",
    [
      "run",
      "--rm",
      "--network",
      "none",
      "--cap-drop",
      "ALL",
      "--security-opt",
      "no-new-privileges",
      "-u",
      "1000:1000",
      "--mount",
      `type=bind,src=${copy},dst=/workspace`,
      image,
      "bash",
      "-c",
      script,
    ],
    { encoding: "utf8" },
  );
}

async function mountsBelow(directory: string): Promise<string[]> {
  return parseMountPoints(await readFile("/proc/self/mountinfo", "utf8")).filter((point) =>
    point.startsWith(`${directory}/`),
  );
}

describe.runIf(asRoot)("carried trees copied once for the copies of one run (overlays)", () => {
  it("layers the second copy over the first copy's snapshot: what a sandbox writes into node_modules never reaches it", async () => {
    const work = await ensurePrivateWorkspace(sharedSpec("work"), { stateDirectory });
    expect(work.seed?.carried).toMatchObject({
      method: "layer",
      snapshot: "made",
      files: 1,
      symlinks: 1,
    });

    // The agent, as an attacker: rewrite a dependency, delete one, change modes, plant a file,
    // try to unmount the layer. The snapshot is no mount of its container (only the overlay is).
    const seen = inContainer(
      work.path,
      [
        "set -e",
        "echo 'module.exports = () => \"pwned\";' > node_modules/left-pad/lib/index.js",
        "rm -rf node_modules/.bin",
        "chmod 777 node_modules/left-pad",
        "echo planted > node_modules/evil.js",
        "mkdir node_modules/.vite-temp",
        "umount node_modules 2>/dev/null && echo unmounted || echo 'umount refused'",
        `test -e ${carrySnapshotPath(path.dirname(work.path), "run1")} && echo reachable || echo unreachable`,
      ].join("\n"),
    );
    expect(seen).toBe("umount refused\nunreachable\n");
    expect(
      await readFile(path.join(work.path, "node_modules", "left-pad", "lib", "index.js"), "utf8"),
    ).toMatch(/pwned/);

    const verify = await ensurePrivateWorkspace(sharedSpec("verify"), { stateDirectory });
    expect(verify.seed?.carried).toMatchObject({ method: "layer", snapshot: "reused" });
    const modules = path.join(verify.path, "node_modules");
    expect(await readFile(path.join(modules, "left-pad", "lib", "index.js"), "utf8")).toBe(
      "module.exports = (s) => s;\n",
    );
    expect(await readlink(path.join(modules, ".bin", "pad"))).toBe("../left-pad/lib/index.js");
    expect((await readdir(modules)).sort()).toEqual([".bin", "left-pad"]);
    expect((await lstat(path.join(modules, "left-pad"))).mode & 0o777).toBe(0o755);
    // Writable in the verify copy too (vite writes node_modules/.vite-temp), owned by its user.
    expect(
      inContainer(verify.path, "mkdir node_modules/.vite-temp && id -u && stat -c %u node_modules"),
    ).toBe("1000\n1000\n");

    // The snapshot goes with the last copy that uses it, every mount with its copy.
    const snapshot = carrySnapshotPath(path.dirname(work.path), "run1");
    await releaseCarryLayers(work.path, { keep: false });
    expect(await lstat(snapshot).then(() => true)).toBe(true);
    await releaseCarryLayers(verify.path, { keep: false });
    await expect(lstat(snapshot)).rejects.toThrow(/ENOENT/);
    expect(await mountsBelow(root)).toEqual([]);
  });

  it("layers a copy planned without a share key (cordon run --carry) over a snapshot of its own, gone with it", async () => {
    const { carryShare: _none, ...spec } = sharedSpec("alone");
    const copy = await ensurePrivateWorkspace(spec, { stateDirectory });
    expect(copy.seed?.carried).toMatchObject({ method: "layer", snapshot: "made", files: 1 });
    const snapshot = carrySnapshotPath(path.dirname(copy.path), path.basename(copy.path));
    expect(await mountsBelow(copy.path)).toEqual([path.join(copy.path, "node_modules")]);
    expect(
      inContainer(
        copy.path,
        "echo x > node_modules/left-pad/lib/index.js && cat node_modules/left-pad/lib/index.js",
      ),
    ).toBe("x\n");
    expect(
      await readFile(path.join(snapshot, "node_modules", "left-pad", "lib", "index.js"), "utf8"),
    ).toMatch(/=> s/);
    await releaseCarryLayers(copy.path, { keep: false });
    await expect(lstat(snapshot)).rejects.toThrow(/ENOENT/);
    expect(await mountsBelow(root)).toEqual([]);
  });

  it("bounds writes into a carried tree by sandbox.disk, and mounts the layers again for a kept copy", async () => {
    const spec = sharedSpec("bounded", { diskBytes: 32 * 1024 ** 2 });
    const copy = await ensurePrivateWorkspace(spec, { stateDirectory });
    const full = inContainer(
      copy.path,
      "{ head -c 64M /dev/zero > node_modules/big.bin; } 2>&1 || true",
    );
    expect(full).toMatch(/No space left on device/);

    // Its container removed with the copy kept: nothing stays mounted; the next acquire mounts again.
    await releaseCarryLayers(copy.path, { keep: true });
    expect(await mountsBelow(copy.path)).toEqual([]);
    await ensurePrivateWorkspace(spec, { stateDirectory });
    expect(
      await readFile(path.join(copy.path, "node_modules", "left-pad", "lib", "index.js"), "utf8"),
    ).toMatch(/=> s/);
  });

  it("refuses to mount again over a carried directory an agent turned into a link", async () => {
    const spec = sharedSpec("relink");
    const copy = await ensurePrivateWorkspace(spec, { stateDirectory });
    await releaseCarryLayers(copy.path, { keep: true });
    // With its overlay gone, the copy's own (empty) mount point is what a container could swap.
    await rm(path.join(copy.path, "node_modules"), { recursive: true });
    await symlink("/etc", path.join(copy.path, "node_modules"));
    await expect(ensurePrivateWorkspace(spec, { stateDirectory })).rejects.toThrow(
      /no longer a directory of its own/,
    );
    expect(await mountsBelow("/etc")).toEqual([]);
  });
});
