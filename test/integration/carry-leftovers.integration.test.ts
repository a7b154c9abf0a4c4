/**
 * What a crash leaves of carried layers (`.carry-<key>` snapshots, half-made ones, a copy's
 * layer record and upper layers whose copy is gone) is swept by `cordon sandbox prune`'s
 * inventory, after its grace; a snapshot a live copy layers, and the copy's overlay, stay.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { lstat, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import {
  DockerEngine,
  SandboxInventory,
  privateWorkspacePath,
  privateWorkspaceRoot,
  releaseCarryLayers,
  type SandboxSpec,
} from "../../src/sandbox/index.js";
import { carryLeftovers, ensureCarrySnapshot } from "../../src/sandbox/workspace/carry-layers.js";
import { ensurePrivateWorkspace } from "../../src/sandbox/workspace/private-workspace.js";
import { mountCountAt } from "../../src/sandbox/workspace/mount-table.js";
import { removeContainersOfHome, requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { testSandboxSpec } from "../support/sandbox-spec.js";
import { removeStateDirectory } from "../support/state-directory.js";

// Overlays are mounted by root only; elsewhere nothing is layered and nothing is left.
const asRoot = process.getuid?.() === 0;

let root: string;
let home: string;
let workspace: string;

beforeEach(async () => {
  await requireSandboxImage();
  root = await mkdtemp(path.join(tmpdir(), "cordon-carry-leftovers-"));
  home = path.join(root, "home");
  workspace = path.join(root, "project");
  await mkdir(path.join(workspace, "node_modules", "left-pad"), { recursive: true });
  await writeFile(path.join(workspace, ".gitignore"), "/node_modules/\n");
  await writeFile(path.join(workspace, "index.js"), "module.exports = 1;\n");
  await writeFile(path.join(workspace, "node_modules", "left-pad", "index.js"), "exports.x = 1;\n");
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@e", ...args], {
      cwd: workspace,
    });
  git("init", "-q");
  git("add", "-A");
  git("commit", "-qm", "p");
});

afterEach(async () => {
  await removeContainersOfHome(home);
  await removeStateDirectory(root);
});

function spec(name: string, carryShare?: string): SandboxSpec {
  const base = testSandboxSpec(name, {
    spec: {
      seed: true,
      agentWorkspace: workspace,
      carry: ["node_modules"],
      ...(carryShare ? { carryShare } : {}),
    },
  });
  return { ...base, privateWorkspace: privateWorkspacePath(home, base.containerName) };
}

/** A pid no process has: one that just exited. */
function deadPid(): number {
  const child = spawnSync("true");
  return child.pid ?? 999_999;
}

const exists = (entry: string): Promise<boolean> =>
  lstat(entry).then(
    () => true,
    () => false,
  );

describe.runIf(asRoot)("prune sweeps carried layers a crash left behind", () => {
  it("removes unnamed and half-made snapshots and the layers of a copy that is gone, keeps a live copy's", async () => {
    const folder = privateWorkspaceRoot(home);
    // A real sandbox whose carried layers must survive, mounted.
    const made = await runCordon(
      [
        "exec",
        "--workspace",
        workspace,
        "--session",
        "live",
        "--carry",
        "node_modules",
        "--",
        "true",
      ],
      { CORDON_HOME: home, CORDON_CONFIG: "", ANTHROPIC_API_KEY: "" },
    );
    expect(made.exitCode, made.stderr).toBe(0);
    const [liveName] = (await readdir(folder)).filter((n) => !n.startsWith("."));
    const liveModules = path.join(folder, liveName ?? "", "node_modules");
    expect(await mountCountAt(liveModules)).toBe(1);

    // 1. A process made a snapshot and died before any copy recorded it.
    const crashed = await ensureCarrySnapshot({
      shareKey: "fix-tests-crashed",
      workspaceParent: folder,
      sourceRoot: workspace,
      paths: ["node_modules"],
      owner: undefined,
      exclude: [],
      warnings: [],
    });
    // 2. A process died while copying one.
    const halfMade = path.join(folder, `.carry-fix-tests-half.tmp-${deadPid()}-0a1b2c3d`);
    await mkdir(path.join(halfMade, "node_modules"), { recursive: true });
    // 3. A copy deleted by hand once its overlay was unmounted: its record, upper layers and own
    //    snapshot stay.
    const gone = await ensurePrivateWorkspace(spec("gone"), { stateDirectory: home });
    await releaseCarryLayers(gone.path, { keep: true });
    await rm(gone.path, { recursive: true, force: true });
    const goneRecord = path.join(folder, `.${path.basename(gone.path)}.carry.json`);
    const goneSnapshot = path.join(folder, `.carry-${path.basename(gone.path)}`);
    expect(await exists(goneSnapshot)).toBe(true);

    const inventory = new SandboxInventory({ engine: new DockerEngine(), stateDirectory: home });
    // Within the grace nothing goes, and prune says why.
    const young = await inventory.prune();
    expect(young.orphans.filter((o) => o.path.includes(".carry"))).toEqual([]);
    expect(young.skipped.map((s) => s.name)).toContain(crashed.path);

    const dry = await inventory.prune({ orphanMinAgeMs: 0, dryRun: true });
    const found = dry.orphans.map((o) => o.path).filter((p) => p.includes(".carry"));
    expect(found.sort()).toEqual([crashed.path, halfMade, goneRecord].sort());
    expect(await exists(crashed.path)).toBe(true);

    const report = await inventory.prune({ orphanMinAgeMs: 0 });
    expect(report.orphans.find((o) => o.path === crashed.path)?.reason).toMatch(
      /snapshot no private workspace layers/,
    );
    for (const entry of [crashed.path, halfMade, goneRecord, goneSnapshot]) {
      expect(await exists(entry), entry).toBe(false);
    }
    expect(await exists(path.join(folder, `.${path.basename(gone.path)}.carry`))).toBe(false);
    // The live copy: its snapshot, record and overlay untouched, its files readable.
    expect(await mountCountAt(liveModules)).toBe(1);
    expect(await readFile(path.join(liveModules, "left-pad", "index.js"), "utf8")).toBe(
      "exports.x = 1;\n",
    );
    expect((await readdir(folder)).filter((n) => n.startsWith(".carry-"))).toEqual([
      `.carry-${liveName}`,
    ]);
  });

  it("judges no snapshot while a seed is being built beside it (it may be about to record one)", async () => {
    const folder = privateWorkspaceRoot(home);
    await mkdir(folder, { recursive: true });
    await ensureCarrySnapshot({
      shareKey: "fix-tests-pending",
      workspaceParent: folder,
      sourceRoot: workspace,
      paths: ["node_modules"],
      owner: undefined,
      exclude: [],
      warnings: [],
    });
    const seeding = path.join(folder, `.cordon-x.seeding-${process.pid}-abc123`);
    await mkdir(seeding);
    expect(await carryLeftovers(folder)).toEqual([]);
    await rm(seeding, { recursive: true });
    expect((await carryLeftovers(folder)).map((l) => path.basename(l.path))).toEqual([
      ".carry-fix-tests-pending",
    ]);
  });
});
