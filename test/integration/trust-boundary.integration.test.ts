/**
 * DESIGN.md §10, rule 1: the host runs no program over an agent-written tree. A repository with a
 * submodule, whose private copy the agent arms the ways git runs code (a clean filter and an
 * fsmonitor in the submodule's own git dir, hooks, an `include.path` to a file in the copy, a
 * nested repository inside the submodule); then `cordon diff`, `apply --check`, `apply`,
 * `checkpoint`, `rollback`, `fork` and `fix-tests` run with a tracer on PATH that logs every host
 * program cordon starts. Each attack would leave a marker on the host; none may, and no traced
 * program may start inside a private copy (its cwd, GIT_DIR, GIT_WORK_TREE or an argument).
 */
import { execFileSync } from "node:child_process";
import { chmod, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { packageRoot } from "../../src/common/index.js";
import {
  diskBudgetSupport,
  overrideDiskBudgetSupport,
  privateWorkspaceRoot,
} from "../../src/sandbox/index.js";
import { git } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

/** Host programs cordon starts, each wrapped to log how it was started. */
const traced = ["git", "du", "mount", "umount", "losetup", "mkfs.ext4", "cp", "tar", "find"];

/**
 * Disk tools name a copy's disk image and mount point, which is no reading of the tree in it: the
 * image is written only by the kernel's ext4 and by mkfs. The one way they read a tree is
 * `mkfs.ext4 -d DIR` (files copied in): only a seed, built from the user's repository before any
 * agent ran (`.NAME.seeding-*`), may be that DIR.
 */
const readsNoTree = (entry: TraceEntry): boolean =>
  ["mount", "umount", "losetup", "mkfs.ext4"].includes(entry.program) &&
  !/(^|\s)-d\s(?!\S*\.seeding-)/.test(entry.args);

interface TraceEntry {
  program: string;
  cwd: string;
  gitDir: string;
  workTree: string;
  args: string;
}

/** A directory to put first on PATH: each traced program logs itself, then runs the real one. */
async function makeTracer(root: string): Promise<{ bin: string; log: string }> {
  const bin = path.join(root, "tracer-bin");
  const log = path.join(root, "trace.log");
  await mkdir(bin);
  await writeFile(log, "");
  for (const program of traced) {
    let real: string;
    try {
      real = execFileSync("sh", ["-c", `command -v ${program}`], { encoding: "utf8" }).trim();
    } catch {
      continue;
    }
    const wrapper = path.join(bin, program);
    // Fields NUL-free and tab-separated; the log's path is written in, since cordon passes git a
    // minimal environment.
    await writeFile(
      wrapper,
      [
        "#!/bin/sh",
        `printf '%s\\t%s\\t%s\\t%s\\t%s\\n' ${program} "$PWD" "\${GIT_DIR-}" "\${GIT_WORK_TREE-}" "$*" >> '${log}'`,
        `exec '${real}' "$@"`,
        "",
      ].join("\n"),
    );
    await chmod(wrapper, 0o755);
  }
  return { bin, log };
}

async function readTrace(log: string): Promise<TraceEntry[]> {
  const text = await readFile(log, "utf8");
  return text
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => {
      const [program = "", cwd = "", gitDir = "", workTree = "", args = ""] = line.split("\t");
      return { program, cwd, gitDir, workTree, args };
    });
}

describe("trust boundary: no host program over an agent-written tree", () => {
  let root: string;
  let home: string;
  let repo: string;
  let markers: string;
  let tracer: { bin: string; log: string };
  const savedPath = process.env["PATH"];
  const env = (): NodeJS.ProcessEnv => ({
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    ANTHROPIC_API_KEY: "",
    ANTHROPIC_BASE_URL: "",
  });
  const sessions: string[] = [];

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-trust-"));
    home = path.join(root, "home");
    markers = path.join(root, "markers");
    await mkdir(markers);
    repo = await repositoryWithSubmodule(root);
    tracer = await makeTracer(root);
    // runCordon runs in this worker's process: its children find programs on this PATH.
    process.env["PATH"] = `${tracer.bin}:${savedPath ?? ""}`;
    // The disk tools are found once per process: found again now, they are the traced ones.
    overrideDiskBudgetSupport(undefined);
  });

  afterAll(async () => {
    process.env["PATH"] = savedPath;
    overrideDiskBudgetSupport(undefined);
    const docker = dockerClient();
    for (const info of await docker.listContainers({ all: true })) {
      const name = info.Names[0] ?? "";
      if (sessions.some((session) => name.includes(session))) {
        await docker
          .getContainer(info.Id)
          .remove({ force: true })
          .catch(() => undefined);
      }
    }
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
  });

  /** Entries that start a program inside a private copy, other than its own seeding. */
  const insideCopies = async (): Promise<TraceEntry[]> => {
    const copies = privateWorkspaceRoot(home);
    const inside = (value: string): boolean => value.includes(copies);
    return (await readTrace(tracer.log)).filter((entry) => {
      const named = readsNoTree(entry) ? [] : [entry.args];
      const touched = [entry.cwd, entry.gitDir, entry.workTree, ...named].some(inside);
      // A seed is built in a temporary directory from the user's repository, before any agent
      // can reach it (recordBaseline over `.NAME.seeding-*`): not an agent-written tree.
      const seeding = [entry.cwd, entry.gitDir, entry.workTree].some((value) =>
        value.includes(".seeding-"),
      );
      return touched && !seeding;
    });
  };

  it("diff, apply --check, apply, checkpoint, rollback and fork run nothing the agent armed, on the host or anywhere it reaches", async () => {
    const session = `armed-${process.pid}`;
    sessions.push(session);
    const cordon = (command: string, ...args: string[]) =>
      runCordon([command, "--workspace", repo, "--session", session, ...args], env());
    // Seeding (host git over the user's repository and the new seed) happens here.
    const seeded = await cordon("exec", "--", "true");
    expect(seeded.exitCode).toBe(0);
    await writeFile(tracer.log, "");

    const armed = await cordon("exec", "--", "sh", "-c", armingScript(markers));
    expect(armed.exitCode, armed.stderr).toBe(0);

    const diff = await cordon("diff", "--json");
    expect(diff.exitCode).toBe(0);
    const shown = JSON.parse(diff.stdout) as { files: { path: string }[] };
    expect(shown.files.map((file) => file.path)).toContain("app.py");
    expect((await cordon("apply", "--check")).exitCode).toBe(0);
    const applied = await cordon("apply", "--yes");
    expect(applied.exitCode).toBe(0);
    expect(await readFile(path.join(repo, "app.py"), "utf8")).toContain("changed by the agent");
    // Checkpoints read and write the armed copy too: in the inspector container, never the host.
    expect((await cordon("checkpoint", "armed")).exitCode).toBe(0);
    expect((await cordon("checkpoints", "--json")).exitCode).toBe(0);
    const rolledBack = await cordon("rollback", "armed");
    expect(rolledBack.exitCode, rolledBack.stderr).toBe(0);
    // A fork copies the armed copy whole, in an inspector container; its diff is read there too.
    const fork = `${session}-fork`;
    sessions.push(fork);
    const forked = await cordon("fork", "--as", fork);
    expect(forked.exitCode, forked.stderr).toBe(0);
    const forkDiff = await runCordon(
      ["diff", "--workspace", repo, "--session", fork, "--json"],
      env(),
    );
    expect(forkDiff.exitCode, forkDiff.stderr).toBe(0);

    expect(await readdir(markers)).toEqual([]);
    expect(await insideCopies()).toEqual([]);
    // The tracer saw cordon's host git at work (on the user's repository): it is not blind. Where
    // copies are disk images, it saw their tools too (the fork's image made and mounted).
    const trace = await readTrace(tracer.log);
    expect(trace.some((entry) => entry.program === "git")).toBe(true);
    if ((await diskBudgetSupport()).enforced) {
      expect(trace.some((entry) => entry.program === "mkfs.ext4")).toBe(true);
      expect(trace.some((entry) => entry.program === "mount")).toBe(true);
    }
  });

  it("fix-tests takes its changes and test outputs without a host program in any copy", async () => {
    await writeFile(tracer.log, "");
    const out = path.join(root, "fix-out");
    const run = await runCordon(
      [
        "fix-tests",
        "--workspace",
        repo,
        "--test-cmd",
        "python3 -m unittest -v",
        "--out",
        out,
        "--model-script",
        path.join(packageRoot(), "examples", "demo", "script.json"),
      ],
      env(),
    );
    const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as {
      sessionKey: string;
      exitCode: number;
      filesChanged: { path: string }[];
    };
    sessions.push(result.sessionKey.split(":").at(-1) ?? "fix-tests");
    expect(run.exitCode, run.stderr).toBe(0);
    expect(result.filesChanged.map((file) => file.path)).toEqual(["pricing.py"]);
    expect(await insideCopies()).toEqual([]);
    expect(await readdir(markers)).toEqual([]);
  });
});

/**
 * What the agent runs in its copy: every way git would run a program of its choosing when the
 * host's git looked at the copy, each leaving a marker in a host directory.
 */
function armingScript(markers: string): string {
  const mark = (name: string) => `sh -c 'id > ${markers}/${name}'`;
  return [
    "set -e",
    // A clean filter in the submodule's own git dir, named by the submodule's .gitattributes.
    `git -C sub config filter.x.clean "${mark("submodule-filter")}; cat"`,
    "echo 's.txt filter=x' > sub/.gitattributes",
    "touch sub/s.txt",
    // An fsmonitor hook and hooks in the submodule's config and git dir.
    `git -C sub config core.fsmonitor "${mark("submodule-fsmonitor")}"`,
    "hooks=$(git -C sub rev-parse --absolute-git-dir)/hooks",
    'mkdir -p "$hooks"',
    `printf '#!/bin/sh\\nid > ${markers}/submodule-hook\\n' > "$hooks/post-index-change"`,
    'chmod +x "$hooks/post-index-change"',
    // An include of a config file the agent wrote in the copy, naming another filter.
    `git config -f .agent-config filter.y.clean "${mark("included-filter")}; cat"`,
    'git config include.path "$PWD/.agent-config"',
    "echo '*.py filter=y' > .gitattributes",
    // A repository nested inside the submodule, with a filter of its own.
    "git init -q sub/nested",
    `git -C sub/nested config filter.z.clean "${mark("nested-filter")}; cat"`,
    "echo '* filter=z' > sub/nested/.gitattributes",
    "echo n > sub/nested/n.txt",
    // The agent's real change.
    "echo \"print('changed by the agent')\" >> app.py",
  ].join("\n");
}

/** A user's repository with a submodule (and the demo's failing test, for fix-tests). */
async function repositoryWithSubmodule(root: string): Promise<string> {
  const library = path.join(root, "library");
  const repo = path.join(root, "repo");
  await mkdir(library);
  await writeFile(path.join(library, "s.txt"), "library\n");
  git(library, "init", "-q");
  git(library, "add", "-A");
  git(library, "commit", "-qm", "library");
  await mkdir(repo);
  execFileSync("cp", ["-a", `${path.join(packageRoot(), "examples", "demo-repo")}/.`, repo]);
  await writeFile(path.join(repo, "app.py"), "print('app')\n");
  git(repo, "init", "-q");
  git(repo, "add", "-A");
  git(repo, "commit", "-qm", "app");
  git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", library, "sub");
  git(repo, "commit", "-qm", "submodule");
  return repo;
}
