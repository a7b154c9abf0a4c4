/**
 * Patches are hostile bytes: each attack an agent can mount on `cordon diff` / `cordon apply` from
 * inside a real seeded sandbox, and what the user sees instead. The agent's moves are made with
 * `cordon exec` in the session's container, as an agent's shell commands would be.
 */
import { mkdtemp, readFile, readdir, readlink, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createRunner } from "../../src/runner/index.js";
import { seedMarkerPath } from "../../src/sandbox/index.js";
import { demoRepo, git } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { runCordon, type CliRun } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

const suffix = `${process.pid}-${Date.now().toString(36)}`;

describe("cordon diff / apply against a hostile agent", () => {
  let home: string;
  let repo: string;
  const sessions: string[] = [];
  const env = (): NodeJS.ProcessEnv => ({
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    ANTHROPIC_API_KEY: "",
    ANTHROPIC_BASE_URL: "",
  });
  const session = (name: string): string => {
    const key = `${name}-${suffix}`;
    sessions.push(key);
    return key;
  };
  const cordon = (key: string, ...args: string[]): Promise<CliRun> =>
    runCordon([...args, "--workspace", repo, "--session", key], env());
  /** What the agent runs in its sandbox. */
  const agent = async (key: string, script: string): Promise<void> => {
    const run = await runCordon(
      ["exec", "--workspace", repo, "--session", key, "--", "sh", "-c", script],
      env(),
    );
    expect(run.stderr).not.toMatch(/error/i);
    expect(run.exitCode).toBe(0);
  };

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-hostile-home-"));
    repo = await demoRepo();
    // An existing symlink inside the workspace, committed: the agent will re-point it.
    await symlink("pricing.py", path.join(repo, "current.py"));
    git(repo, "add", "-A");
    git(repo, "commit", "-qm", "link");
  });

  afterAll(async () => {
    const runner = createRunner({ env: env(), workspace: repo });
    const docker = dockerClient();
    for (const sessionKey of sessions) {
      const plan = await runner.plan({ sessionKey }).catch(() => undefined);
      const name = plan?.sandbox.spec?.containerName;
      if (name)
        await docker
          .getContainer(name)
          .remove({ force: true })
          .catch(() => undefined);
    }
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("a test change hidden behind a `++ b/pricing.py` content line is reported as the test file", async () => {
    const key = session("spoof");
    await agent(key, "printf '\\n++ b/pricing.py\\n' >> test_pricing.py");
    const diff = await cordon(key, "diff", "--json");
    expect(diff.exitCode).toBe(0);
    const shown = JSON.parse(diff.stdout) as { files: { path: string }[]; patch: string };
    // The spoofing line is in the patch, and is read as the content it is.
    expect(shown.patch).toContain("\n+++ b/pricing.py\n");
    expect(shown.files.map((f) => f.path)).toEqual(["test_pricing.py"]);
  });

  it("a file name with terminal escapes is listed with them shown, not obeyed", async () => {
    const key = session("escape");
    await agent(key, "printf x > \"$(printf 'evil\\033[2K\\rok.txt')\"");
    const stat = await cordon(key, "diff", "--stat");
    expect(stat.exitCode).toBe(0);
    // git's diffstat, with the name quoted by git: escapes shown as text.
    expect(stat.stdout).toBe(
      ' "evil\\033[2K\\rok.txt" |    1 +\n 1 file changed, 1 insertion(+)\n',
    );
  });

  it("a mistyped session is refused by diff and apply --check, and no container is made for it", async () => {
    const key = session("typo");
    for (const args of [["diff"], ["apply", "--check"]]) {
      const run = await cordon(key, ...args);
      expect(run.exitCode).toBe(2);
      expect(run.stderr).toMatch(/no sandbox for session agent:main:typo-\S+ in /);
    }
    const plan = await createRunner({ env: env(), workspace: repo }).plan({ sessionKey: key });
    const name = plan.sandbox.spec?.containerName ?? "";
    await expect(dockerClient().getContainer(name).inspect()).rejects.toMatchObject({
      statusCode: 404,
    });
  });

  it("apply run twice applies once, then says the changes are already there", async () => {
    const key = session("twice");
    await agent(key, "echo '# twice' >> pricing.py");
    const stat = await cordon(key, "diff", "--stat");
    // git's diffstat, as `git apply --stat` prints it.
    expect(stat.stdout).toBe(" pricing.py |    1 +\n 1 file changed, 1 insertion(+)\n");
    expect((await cordon(key, "apply")).exitCode).toBe(0);
    const again = await cordon(key, "apply");
    expect(again.exitCode).toBe(0);
    expect(again.stderr).toMatch(/^these changes are already in the workspace \(sha256 \w+\)$/m);
    expect(await readFile(path.join(repo, "pricing.py"), "utf8")).toMatch(/\n# twice\n$/);
    git(repo, "checkout", "--", "pricing.py");
  });

  it("the copy's diff.mnemonicPrefix and diff.noprefix do not change the paths", async () => {
    const key = session("prefix");
    await agent(
      key,
      "git config diff.mnemonicPrefix true && git config diff.noprefix true && echo '# note' >> pricing.py",
    );
    const diff = await cordon(key, "diff", "--json");
    expect(diff.exitCode).toBe(0);
    const shown = JSON.parse(diff.stdout) as { files: { path: string }[]; patch: string };
    expect(shown.patch).toContain("diff --git a/pricing.py b/pricing.py\n");
    expect(shown.files.map((f) => f.path)).toEqual(["pricing.py"]);
    const apply = await cordon(key, "apply");
    expect(apply.exitCode).toBe(0);
    expect(await readFile(path.join(repo, "pricing.py"), "utf8")).toMatch(/# note\n$/);
    git(repo, "checkout", "--", "pricing.py");
  });

  it("a symlink re-pointed to /etc/passwd without a mode change is refused by apply", async () => {
    const key = session("symlink");
    await agent(key, "ln -sfn /etc/passwd current.py");
    const diff = await cordon(key, "diff");
    expect(diff.stdout).toMatch(/^index \w+\.\.\w+ 120000$/m);
    expect(diff.stdout).not.toMatch(/mode/);
    const apply = await cordon(key, "apply");
    expect(apply.exitCode).toBe(7);
    expect(apply.stderr).toContain(
      "current.py is a symlink that leads out of the workspace: current.py -> /etc/passwd leaves the workspace",
    );
    expect(await readlink(path.join(repo, "current.py"))).toBe("pricing.py");
    expect(git(repo, "status", "--porcelain")).toBe("");
  });

  it("symlink chains are resolved as the kernel does: links that look inside as text are refused", async () => {
    // Beside the repository: what a link escaping it by one level reaches.
    const victim = path.join(path.dirname(repo), "victim");
    await writeFile(victim, "the user's file\n");
    const key = session("chain");
    // `l -> a/x/../victim` reads as `a/victim`, but `a/x` is the root: `l` is the repo's sibling.
    // `deep` goes through three links to the same place, and `b/planted` is written through one.
    await agent(
      key,
      [
        "mkdir -p a d/e/f b",
        "ln -s .. a/x",
        "ln -s a/x/../victim l",
        "ln -s .. d/e/f/g && ln -s f/g/.. d/e/h && ln -s e/h/.. d/i",
        "ln -s d/i/../victim deep",
      ].join(" && "),
    );
    for (const args of [
      ["apply", "--check"],
      ["apply", "--yes"],
    ]) {
      const apply = await cordon(key, ...args);
      expect(apply.exitCode, apply.stderr).toBe(7);
      expect(apply.stderr).toContain(
        "l is a symlink that leads out of the workspace: l -> a/x/../victim: a/x -> .. leaves the workspace",
      );
      expect(apply.stderr).toContain(
        "deep is a symlink that leads out of the workspace: deep -> d/i/../victim: d/i -> e/h/..: d/e/h -> f/g/..: d/e/f/g -> .. leaves the workspace",
      );
    }
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(await readFile(victim, "utf8")).toBe("the user's file\n");
  });

  it("a file written through the repository's own link that leads out is refused with exit 7", async () => {
    const outside = await mkdtemp(path.join(tmpdir(), "cordon-outside-"));
    const key = session("through");
    try {
      // The user's workspace has an uncommitted link out of it; the agent writes beneath the name.
      await agent(key, "mkdir -p out && echo planted > out/planted.txt");
      await symlink(outside, path.join(repo, "out"));
      const apply = await cordon(key, "apply", "--yes");
      expect(apply.exitCode, apply.stderr).toBe(7);
      expect(apply.stderr).toContain(
        `out/planted.txt is written through a symlink that leads out of the workspace: out -> ${outside} leaves the workspace`,
      );
      expect(await readdir(outside)).toEqual([]);
    } finally {
      await rm(path.join(repo, "out"), { force: true });
      await rm(outside, { recursive: true, force: true });
    }
  });

  it("changes that move between diff and apply are shown again and not written without --yes", async () => {
    const key = session("swap");
    // A background process the agent leaves behind (the exec tool's background mode) keeps
    // rewriting a file.
    const loop = 'i=0; while :; do i=$((i+1)); echo "total = $i" > pricing.py; sleep 0.02; done';
    const started = await cordon(
      key,
      "tool",
      "exec",
      "--input",
      JSON.stringify({ command: loop, background: true }),
    );
    expect(started.exitCode).toBe(0);
    // Polled: on a loaded machine the loop's first write may take a while.
    await agent(
      key,
      "for i in $(seq 300); do grep -q 'total = ' pricing.py && exit 0; sleep 0.1; done; exit 1",
    );
    const diff = await cordon(key, "diff");
    expect(diff.exitCode).toBe(0);
    const reviewed = /sha256 ([0-9a-f]{64})/.exec(diff.stderr)?.[1];
    expect(reviewed).toBeDefined();

    const apply = await cordon(key, "apply");
    expect(apply.exitCode).toBe(2);
    expect(apply.stderr).toContain(`(sha256 ${reviewed ?? ""})`);
    expect(apply.stderr).toMatch(/not the ones last reviewed, so nothing was written/);
    expect(apply.stdout).toContain("diff --git a/pricing.py b/pricing.py");
    expect(git(repo, "status", "--porcelain")).toBe("");
    const json = await cordon(key, "apply", "--json");
    expect(json.exitCode).toBe(2);
    expect(JSON.parse(json.stdout)).toMatchObject({ applied: false, decision: "refused" });
    expect(git(repo, "status", "--porcelain")).toBe("");

    // --yes applies exactly the bytes that run showed, whatever the file says by then.
    const confirmed = await cordon(key, "apply", "--yes");
    expect(confirmed.exitCode).toBe(0);
    // (The loop may have been caught between truncating the file and writing it: then empty.)
    const printed = /^\+(total = \d+)$/m.exec(confirmed.stdout)?.[1];
    const expected = printed === undefined ? "" : `${printed}\n`;
    expect(await readFile(path.join(repo, "pricing.py"), "utf8")).toBe(expected);
    git(repo, "checkout", "--", "pricing.py");
  });

  it("freeze: while cordon reads the copy no sandbox process runs, and afterwards they all do", async () => {
    const key = session("freeze");
    const loop = "i=0; while :; do i=$((i+1)); echo $i > counter; sleep 0.01; done";
    const started = await cordon(
      key,
      "tool",
      "exec",
      "--input",
      JSON.stringify({ command: loop, background: true }),
    );
    expect(started.exitCode).toBe(0);
    const runner = createRunner({ env: env(), workspace: repo });
    const { lease } = await runner.acquireSandbox({ sessionKey: key });
    try {
      const counter = path.join(lease.privateWorkspace ?? "", "counter");
      const read = async (): Promise<string> => readFile(counter, "utf8").catch(() => "");
      await agent(key, "sleep 0.2; test -s counter");
      const frozen = await lease.freeze?.(async () => {
        const first = await read();
        await new Promise((resolve) => setTimeout(resolve, 500));
        return [first, await read()];
      });
      expect(frozen?.[0]).toBe(frozen?.[1]);
      const docker = dockerClient();
      const name = (await runner.plan({ sessionKey: key })).sandbox.spec?.containerName ?? "";
      expect((await docker.getContainer(name).inspect()).State.Paused).toBe(false);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await read()).not.toBe(frozen?.[1]);
    } finally {
      await lease.release();
    }
  });

  it("refuses a private copy seeded from another workspace, naming both", async () => {
    const key = session("foreign");
    await agent(key, "echo '# mine' >> pricing.py");
    const runner = createRunner({ env: env(), workspace: repo });
    const privateWorkspace = (await runner.plan({ sessionKey: key })).sandbox.spec
      ?.privateWorkspace;
    const marker = seedMarkerPath(privateWorkspace ?? "");
    const seed = JSON.parse(await readFile(marker, "utf8")) as { source: string };
    const other = await mkdtemp(path.join(tmpdir(), "cordon-other-project-"));
    try {
      await writeFile(marker, JSON.stringify({ ...seed, source: other }));
      for (const command of ["diff", "apply"]) {
        const refused = await cordon(key, command);
        expect(refused.exitCode).toBe(2);
        expect(refused.stderr).toContain(`seeded from ${other}, not from this workspace`);
      }
      expect(git(repo, "status", "--porcelain")).toBe("");
    } finally {
      await rm(other, { recursive: true, force: true });
    }
  });
});
