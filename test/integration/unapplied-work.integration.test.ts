/**
 * Cleanup never removes unapplied work: sandboxes made through the CLI in a private CORDON_HOME,
 * whose seeded copies hold changes that were never applied, applied ones, or none; pruned and
 * removed through the CLI (no terminal: nothing is asked) and by the automatic prune of an acquire.
 */
import { execFileSync } from "node:child_process";
import { lstat, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import {
  DockerEngine,
  DockerSandboxManager,
  baselineGitDir,
  privateWorkspacePath,
  SandboxInventory,
  UnappliedChangesError,
  type PruneReport,
  type SandboxSummary,
} from "../../src/sandbox/index.js";
import { git } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { runCordon, type CliRun } from "../support/run-cli.js";
import { createRecordingSandbox } from "../support/recording-sandbox.js";
import { testSandboxSpec } from "../support/sandbox-spec.js";
import { removeStateDirectory } from "../support/state-directory.js";

/** The uid the sandbox runs as for a workspace this test owns ("auto" never picks root). */
const sandboxUid = process.getuid?.() === 0 ? 1000 : (process.getuid?.() ?? 1000);

const exists = (file: string): Promise<boolean> =>
  lstat(file).then(
    () => true,
    () => false,
  );

describe("prune and rm keep unapplied work", () => {
  let root: string;
  let home: string;
  let project: string;
  let keptName = "";
  const env = (): NodeJS.ProcessEnv => ({ CORDON_HOME: home, CORDON_CONFIG: "" });
  const cordon = (args: string[], confirm?: (q: string) => Promise<boolean | undefined>) =>
    runCordon(args, env(), "", confirm);
  /** `cordon exec` in the project's sandbox of `session`. */
  const inSession = (session: string, line: string): Promise<CliRun> =>
    cordon(["exec", "--workspace", project, "--session", session, "--", "sh", "-c", line]);

  async function sandboxOf(session: string): Promise<SandboxSummary | undefined> {
    const listed = await cordon(["sandbox", "list", "--json"]);
    const all = (JSON.parse(listed.stdout) as { sandboxes: SandboxSummary[] }).sandboxes;
    return all.find((sandbox) => sandbox.session === `agent:main:${session}`);
  }

  async function prune(...flags: string[]): Promise<PruneReport> {
    const result = await cordon(["sandbox", "prune", "--idle", "0s", "--json", ...flags]);
    expect(result.exitCode, result.stderr).toBe(0);
    return JSON.parse(result.stdout) as PruneReport;
  }

  const names = (entries: readonly { name: string }[]) => entries.map((e) => e.name).sort();

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-unapplied-"));
    home = path.join(root, "home");
    project = path.join(root, "shop");
    await mkdir(project);
    await writeFile(path.join(project, "file.txt"), "base\n");
    git(project, "init", "-q");
    git(project, "add", "-A");
    git(project, "commit", "-qm", "init");
    if (process.getuid?.() === 0) {
      execFileSync("chown", ["-R", `${sandboxUid}:${sandboxUid}`, project]);
    }
    // work: unapplied changes, its container running; clean: none; applied: applied.
    const seeded = await inSession("work", "echo wip > partial.txt && echo more >> file.txt");
    expect(seeded.exitCode).toBe(0);
    // The project's one file is counted apart from its repository's.
    expect(seeded.stderr).toMatch(/ \(git: 1 file and \.git \(\d+ files\), \d+ kB\)/);
    expect((await inSession("clean", "true")).exitCode).toBe(0);
    expect((await inSession("applied", "echo done > done.txt")).exitCode).toBe(0);
    const applied = await cordon([
      "apply",
      "--workspace",
      project,
      "--session",
      "applied",
      "--yes",
    ]);
    expect(applied.exitCode, applied.stderr).toBe(0);
    expect(await readFile(path.join(project, "done.txt"), "utf8")).toBe("done\n");
  });

  afterAll(async () => {
    await cordon(["sandbox", "rm", "--all", "--discard-changes"]);
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
  });

  it("a dry run lists the sandbox with unapplied work, its changed files and the command that shows them", async () => {
    const work = await sandboxOf("work");
    const text = await cordon(["sandbox", "prune", "--idle", "0s", "--dry-run"]);
    expect(text.exitCode).toBe(0);
    expect(text.stdout).toContain(
      `kept ${work?.name} (idle; it holds 2 changed files never applied: \`cordon diff --agent main --session work\` in ${project} shows them, \`cordon apply --agent main --session work\` applies them)`,
    );
    expect(text.stdout).toContain("--discard-changes removes them too");
    const report = await prune("--dry-run");
    expect(names(report.keptForChanges)).toEqual([work?.name]);
    expect(report.keptForChanges[0]?.changes).toMatchObject({
      changedFiles: 2,
      review: "cordon diff --agent main --session work",
      project,
    });
    expect(report.removed.map((r) => r.name)).not.toContain(work?.name);
    // Read with the sandbox frozen, and thawed after.
    expect((await sandboxOf("work"))?.state).toBe("running");
  });

  it("prune removes the unchanged and the applied sandboxes and keeps the one with unapplied work", async () => {
    const [work, clean, applied] = await Promise.all(
      ["work", "clean", "applied"].map((session) => sandboxOf(session)),
    );
    const report = await prune();
    expect(names(report.removed)).toEqual(
      names([clean, applied].map((s) => ({ name: s?.name ?? "" }))),
    );
    expect(names(report.keptForChanges)).toEqual([work?.name]);
    expect(await sandboxOf("work")).toBeDefined();
    expect(await sandboxOf("clean")).toBeUndefined();
  });

  it("rm without a terminal refuses, naming the changes and the flags; --keep-workspace is not blocked", async () => {
    const work = await sandboxOf("work");
    const refused = await cordon(["sandbox", "rm", work?.name ?? ""]);
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toContain(`${work?.name} holds 2 changed files never applied`);
    expect(refused.stderr).toContain("cordon diff --agent main --session work");
    expect(refused.stderr).toContain("--discard-changes");
    expect(await sandboxOf("work")).toBeDefined();

    // Asked on a terminal and answered no: kept; the diff still shows the work.
    let asked = "";
    const declined = await cordon(["sandbox", "rm", work?.name ?? ""], (question) => {
      asked = question;
      return Promise.resolve(false);
    });
    expect(declined.exitCode).toBe(2);
    expect(asked).toMatch(/Remove .* and lose them\?/);
    const diff = await cordon(["diff", "--workspace", project, "--session", "work", "--stat"]);
    expect(diff.stdout).toContain("partial.txt");

    const other = await inSession("kept", "echo keep > keep.txt");
    expect(other.exitCode).toBe(0);
    keptName = (await sandboxOf("kept"))?.name ?? "";
    const kept = await cordon(["sandbox", "rm", keptName, "--keep-workspace"]);
    expect(kept.exitCode, kept.stderr).toBe(0);
    expect(kept.stdout).toContain("kept its workspace");
  });

  it("after an apply, rm's refusal counts what changed since, and says some may be applied already", async () => {
    expect((await inSession("again", "echo a > a.txt")).exitCode).toBe(0);
    const applied = await cordon(["apply", "--workspace", project, "--session", "again", "--yes"]);
    expect(applied.exitCode, applied.stderr).toBe(0);
    expect((await inSession("again", "echo b > b.txt")).exitCode).toBe(0);
    const again = await sandboxOf("again");
    const refused = await cordon(["sandbox", "rm", again?.name ?? ""]);
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toContain(
      `${again?.name} holds changes made since \`cordon apply\` last applied its work (2 files differ from the seed, some perhaps applied already)`,
    );
    expect(await sandboxOf("again")).toBeDefined();
  });

  it("the automatic prune of an acquire keeps it too", async () => {
    const work = await sandboxOf("work");
    // An unchanged idle sandbox the sweep removes: the sweep ran.
    expect((await inSession("unchanged", "true")).exitCode).toBe(0);
    const manager = new DockerSandboxManager({
      engine: new DockerEngine(),
      stateDirectory: home,
      image: await requireSandboxImage(),
      createSandbox: createRecordingSandbox,
      prune: { idleMs: 1, everyMs: 0 },
    });
    const base = testSandboxSpec("unapplied-auto", { spec: { agentWorkspace: root } });
    const privateWorkspace = privateWorkspacePath(home, base.containerName);
    const lease = await manager.acquire({
      ...base,
      privateWorkspace,
      mounts: [
        { source: privateWorkspace, target: "/workspace", readOnly: false, role: "workspace" },
      ],
    });
    await lease.release();
    await manager.flush();
    expect(await sandboxOf("unchanged")).toBeUndefined();
    expect(await sandboxOf("work")).toBeDefined();
    // The copy `rm --keep-workspace` kept is an orphan now, with work in it: kept as well.
    // (Its disk image, if it has one, is not mounted: the baseline goes only with the copy.)
    const keptCopy = path.join(home, "workspaces", keptName);
    expect(await exists(keptCopy)).toBe(true);
    expect(await exists(baselineGitDir(keptCopy))).toBe(true);
    await dockerClient().getContainer(lease.containerName).remove({ force: true });
    expect(work?.name).toBeDefined();
  });

  it("a run that never made its container discards a clean orphaned copy but keeps one holding an older run's work", async () => {
    const inventory = new SandboxInventory({ engine: new DockerEngine(), stateDirectory: home });
    // `--rm` on session kept, stopped before its container existed: the copy it found is kept.
    const keptCopy = path.join(home, "workspaces", keptName);
    const refused = inventory.discardOrphan(keptCopy, { project, sessionKey: "agent:main:kept" });
    await expect(refused).rejects.toBeInstanceOf(UnappliedChangesError);
    await expect(refused).rejects.toThrow(/holds 1 changed file never applied/);
    // (Its files may be in its unmounted disk image: the copy and its baseline are what is seen.)
    expect(await exists(keptCopy)).toBe(true);
    expect(await exists(baselineGitDir(keptCopy))).toBe(true);

    // A copy with nothing in it but the seed is what the stopped run made: it goes.
    expect((await inSession("seeded-only", "true")).exitCode).toBe(0);
    const seededOnly = (await sandboxOf("seeded-only"))?.name ?? "";
    expect((await cordon(["sandbox", "rm", seededOnly, "--keep-workspace"])).exitCode).toBe(0);
    const seededCopy = path.join(home, "workspaces", seededOnly);
    expect(await exists(seededCopy)).toBe(true);
    expect(await inventory.discardOrphan(seededCopy)).toBe(true);
    expect(await exists(seededCopy)).toBe(false);
  });

  it("--discard-changes removes it, and says what was discarded", async () => {
    const work = await sandboxOf("work");
    const report = await prune("--discard-changes");
    const removed = report.removed.find((r) => r.name === work?.name);
    expect(removed?.discardedChanges?.changedFiles).toBe(2);
    expect(report.keptForChanges).toEqual([]);
    expect(await sandboxOf("work")).toBeUndefined();
  });
});
