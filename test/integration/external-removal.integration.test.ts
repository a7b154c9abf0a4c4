/**
 * Sandboxes removed behind cordon's back, as a CI job's cleanup does it (the raw engine API, every
 * container labelled with this state directory): `sandbox list` names what they left, `sandbox
 * prune` releases it — no mount, no loop device, work never applied kept in its disk image — and
 * `rm -rf` of the state directory then succeeds.
 */
import { execFile } from "node:child_process";
import { lstat, mkdtemp, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import type { ListedJson } from "../../src/cli/commands/sandbox-list.js";
import type { RunPlan } from "../../src/policy/index.js";
import {
  SandboxRecords,
  diskImagePath,
  mountCountAt,
  type PruneReport,
} from "../../src/sandbox/index.js";
import { demoRepo } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { loopBackingFiles } from "../support/loop-devices.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

const run = promisify(execFile);

describe("sandboxes removed with the raw engine API", () => {
  let root: string;
  let home: string;
  let repo: string;
  let config: string;
  const prefix = `gone-${process.pid}-${Date.now().toString(36)}`;
  const cordon = (...args: string[]) =>
    runCordon(args, { CORDON_HOME: home, CORDON_CONFIG: config });

  /** The private workspace and container name `session` gets. */
  async function specOf(session: string): Promise<{ workspace: string; name: string }> {
    const explained = await cordon(
      "sandbox",
      "explain",
      "--json",
      "--workspace",
      repo,
      "--session",
      session,
    );
    const spec = (JSON.parse(explained.stdout) as RunPlan).sandbox.spec;
    return { workspace: spec?.privateWorkspace ?? "", name: spec?.containerName ?? "" };
  }

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-gone-"));
    home = path.join(root, "home");
    config = path.join(root, "cordon.json5");
    // A disk budget: each private workspace is a loop-mounted disk image.
    await writeFile(config, `{ agents: { defaults: { sandbox: { disk: "64m" } } } }\n`);
    repo = await demoRepo();
  });

  afterAll(async () => {
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("list names the orphans (text and JSON), prune releases them, rm -rf of the state directory succeeds", async () => {
    const clean = await specOf(`${prefix}-clean`);
    const work = await specOf(`${prefix}-work`);
    const made = await Promise.all([
      cordon("exec", "--workspace", repo, "--session", `${prefix}-clean`, "--", "true"),
      cordon(
        "exec",
        "--workspace",
        repo,
        "--session",
        `${prefix}-work`,
        "--",
        "sh",
        "-c",
        "echo wip > partial.txt",
      ),
    ]);
    for (const result of made) expect(result.exitCode, result.stderr).toBe(0);
    expect(await mountCountAt(clean.workspace)).toBe(1);
    expect(await mountCountAt(work.workspace)).toBe(1);

    // A CI cleanup: every container of this state directory, force-removed through the engine API.
    const docker = dockerClient();
    const containers = await docker.listContainers({
      all: true,
      filters: { label: [`cordon.home=${home}`] },
    });
    expect(containers.map((c) => c.Names[0]?.slice(1)).sort()).toEqual(
      [clean.name, work.name].sort(),
    );
    for (const container of containers) {
      await docker.getContainer(container.Id).remove({ force: true });
    }

    // The next command that uses the state directory says so, once: not while an acquire in
    // another process could still be making them (prune's grace), then once, then no more.
    const sessions = () => cordon("sessions", "list", "--workspace", repo);
    expect((await sessions()).stderr).not.toContain("outlive");
    const records = new SandboxRecords(home);
    const minuteAgo = async () => {
      const past = new Date(Date.now() - 120_000);
      for (const { name, workspace } of [clean, work]) {
        await records.update(name, (record) => ({ ...record, lastUsedAt: past.toISOString() }));
        await utimes(workspace, past, past);
      }
    };
    await minuteAgo();
    const noticed = await sessions();
    expect(noticed.exitCode, noticed.stderr).toBe(0);
    expect(noticed.stderr).toContain(
      "cordon: 2 private workspaces outlive their containers (2 still mounted, each holding a loop device), removed outside cordon: `cordon sandbox prune` releases them and keeps work never applied; `cordon sandbox list` names them\n",
    );
    expect((await sessions()).stderr).not.toContain("outlive");
    // Back to "in use moments ago", as the records were when the containers went.
    const now = new Date();
    for (const { name, workspace } of [clean, work]) {
      await records.update(name, (record) => ({ ...record, lastUsedAt: now.toISOString() }));
      await utimes(workspace, now, now);
    }

    const listed = JSON.parse((await cordon("sandbox", "list", "--json")).stdout) as ListedJson;
    expect(listed.sandboxes).toEqual([]);
    expect(listed.orphans).toEqual(
      [
        { path: clean.workspace, sandbox: clean.name, diskImage: true, mounted: true },
        { path: work.workspace, sandbox: work.name, diskImage: true, mounted: true },
      ].sort((a, b) => a.path.localeCompare(b.path)),
    );
    const text = await cordon("sandbox", "list");
    expect(text.stderr).toContain(
      `orphaned workspace ${work.workspace} of ${work.name}: a mounted disk image, holding a loop device, whose container is gone`,
    );
    // `rm --all` removes containers; it names what is left rather than "nothing to remove".
    const removeAll = await cordon("sandbox", "rm", "--all");
    expect(removeAll.exitCode, removeAll.stderr).toBe(0);
    expect(removeAll.stderr).toContain("no sandbox containers to remove\n");
    expect(removeAll.stderr).toContain(`orphaned workspace ${work.workspace} of ${work.name}:`);
    expect(removeAll.stderr).toContain("`cordon sandbox prune` releases it");

    // Right away, an acquire in another process could be making them again: prune says when.
    const early = await cordon("sandbox", "prune");
    expect(early.exitCode, early.stderr).toBe(0);
    expect(early.stdout).toContain(`kept ${clean.name} (no container uses it, but it was in use`);
    expect(early.stdout).toContain("`cordon sandbox prune` releases it only after");

    // A minute later, as far as the records and directories can tell.
    await minuteAgo();
    const pruned = await cordon("sandbox", "prune", "--json");
    expect(pruned.exitCode, pruned.stderr).toBe(0);
    const report = JSON.parse(pruned.stdout) as PruneReport;
    expect(report.orphans.map((o) => o.path)).toContain(clean.workspace);
    expect(report.keptForChanges.map((k) => [k.workspace, k.changes?.changedFiles])).toEqual([
      [work.workspace, 1],
    ]);
    expect(await mountCountAt(clean.workspace)).toBe(0);
    expect(await mountCountAt(work.workspace)).toBe(0);
    expect(await lstat(clean.workspace).catch(() => undefined)).toBeUndefined();
    // The work never applied stays, in its disk image, mounted by nothing.
    expect(await lstat(diskImagePath(work.workspace)).catch(() => undefined)).toBeDefined();
    await expect
      .poll(async () => (await loopBackingFiles()).filter((file) => file.startsWith(home)))
      .toEqual([]);
    const after = JSON.parse((await cordon("sandbox", "list", "--json")).stdout) as ListedJson;
    expect(after.orphans).toEqual([
      { path: work.workspace, sandbox: work.name, diskImage: true, mounted: false },
    ]);

    // Nothing holds a file of the state directory: a plain `rm -rf` of it works.
    await run("rm", ["-rf", home]);
    expect(await lstat(home).catch(() => undefined)).toBeUndefined();
  });
});
