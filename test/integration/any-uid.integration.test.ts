/**
 * The built CLI run as the users people run it as: uid 1001 (the GitHub Actions runner), uid 1000
 * (the first user of a Linux desktop) and root. Each seeds a copy, lets a scripted agent edit it
 * and report what the sandbox looks like from inside, shows the change with `cordon diff`, and
 * fixes a failing test with `cordon fix-tests`. As 1001, a sandbox user that cannot write the
 * copy is refused before the model is called, the disk budget falls back to the watchdog, and the
 * GitHub Actions recipe's own step scripts (examples/github-actions/fix-tests.yml) run as written
 * against a Messages API server standing in for the model.
 *
 * The test switches users with setpriv (the process runs as root), giving the Docker socket's
 * group as a supplementary group: nothing on the host is changed for it, except a passwd entry
 * for a uid that has none, removed again at the end.
 */
import { execFile } from "node:child_process";
import { chmod, chown, mkdir, mkdtemp, readFile, readdir, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";

import { packageRoot } from "../../src/common/index.js";
import { labelKeys } from "../../src/sandbox/docker/container-options.js";
import { demoRepo, example } from "../support/demo-repo.js";
import { dockerClient, removeContainer, requireSandboxImage } from "../support/docker.js";
import { startMessagesApiServer } from "../support/messages-api-server.js";
import { removeStateDirectory } from "../support/state-directory.js";

const run = promisify(execFile);
const cli = path.join(packageRoot(), "dist", "cli", "main.js");
const dockerSocket = "/var/run/docker.sock";

interface Outcome {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** A user the CLI runs as, with its own project, HOME and CORDON_HOME, all its own. */
interface Invoker {
  uid: number;
  gid: number;
  root: string;
  repo: string;
  cordonHome: string;
}

/** The agent fixes the bug, then writes down who it is and what it can write, into the copy. */
const probingAgent = {
  version: 1,
  model: "scripted-prober",
  turns: [
    {
      content: [
        {
          type: "tool_use",
          name: "edit",
          input: {
            path: "pricing.py",
            old_text: "    return subtotal + discount",
            new_text: "    return subtotal - discount",
          },
        },
      ],
    },
    {
      content: [
        {
          type: "tool_use",
          name: "exec",
          input: {
            command: [
              "{",
              '  echo "uid $(id -u)"',
              '  echo "home $HOME"',
              "  python3 -c 'import getpass; print(\"name\", getpass.getuser())'",
              '  mkdir -p "$HOME/.cache/pip" && touch "$HOME/.cache/pip/probe" && echo "cache writable"',
              '  echo "npm cache $(npm config get cache)"',
              "} > sandbox-facts.txt 2>&1",
            ].join("\n"),
          },
        },
      ],
    },
    { content: [{ type: "text", text: "Fixed the discount, and wrote down what I found." }] },
  ],
};

describe("cordon as any uid", () => {
  let scripts: string;
  let dockerGid: number;
  const invokers: Invoker[] = [];
  const addedUsers: string[] = [];

  beforeAll(async () => {
    if (process.getuid?.() !== 0) {
      throw new Error(
        "this test switches to uids 1000 and 1001: run the integration tests as root",
      );
    }
    await requireSandboxImage();
    await stat(cli).catch(() => {
      throw new Error(`${cli} is missing: run \`npm run build\` first`);
    });
    dockerGid = (await stat(dockerSocket)).gid;
    scripts = await mkdtemp(path.join(tmpdir(), "cordon-any-uid-scripts-"));
    await writeFile(path.join(scripts, "prober.json"), JSON.stringify(probingAgent));
    // Every user reads the scripts (mkdtemp makes the directory 0700).
    await chmod(scripts, 0o755);
  });

  afterAll(async () => {
    const docker = dockerClient();
    for (const invoker of invokers) {
      const mine = await docker.listContainers({
        all: true,
        filters: { label: [`${labelKeys.home}=${invoker.cordonHome}`] },
      });
      for (const info of mine) await removeContainer(docker.getContainer(info.Id));
      await removeStateDirectory(invoker.root);
    }
    for (const name of addedUsers) await run("userdel", [name]);
    if (scripts) await removeStateDirectory(scripts);
  });

  /** A user with that uid (made when the host has none), its project and homes. */
  async function invoker(uid: number): Promise<Invoker> {
    let gid = uid;
    const entry = await run("getent", ["passwd", String(uid)]).catch(() => undefined);
    if (entry) {
      gid = Number(entry.stdout.split(":")[3]);
    } else if (uid !== 0) {
      const name = `cordon-test-${uid}`;
      await run("useradd", ["--uid", String(uid), "--user-group", "--no-create-home", name]);
      addedUsers.push(name);
      gid = Number((await run("id", ["-g", name])).stdout.trim());
    }
    const root = await mkdtemp(path.join(tmpdir(), `cordon-uid-${uid}-`));
    const repo = path.join(root, "repo");
    const cordonHome = path.join(root, "cordon-home");
    const project = await demoRepo();
    await run("mv", [project, repo]);
    await run("rm", ["-rf", path.dirname(project)]);
    await mkdir(path.join(root, "home"));
    await run("chown", ["-R", `${uid}:${gid}`, root]);
    await chown(root, uid, gid);
    const made = { uid, gid, root, repo, cordonHome };
    invokers.push(made);
    return made;
  }

  /** A command in the project as that user, with the Docker socket's group and nothing else. */
  async function asUser(
    who: Invoker,
    command: string[],
    env: NodeJS.ProcessEnv = {},
  ): Promise<Outcome> {
    const switchUser =
      who.uid === 0
        ? []
        : [
            "setpriv",
            `--reuid=${who.uid}`,
            `--regid=${who.gid}`,
            `--groups=${dockerGid}`,
            "--inh-caps=-all",
          ];
    const argv = [...switchUser, ...command];
    try {
      const { stdout, stderr } = await run(argv[0] ?? "", argv.slice(1), {
        cwd: who.repo,
        env: {
          PATH: process.env["PATH"],
          HOME: path.join(who.root, "home"),
          CORDON_HOME: who.cordonHome,
          CORDON_CONFIG: "",
          CORDON_LOG_LEVEL: "silent",
          ...env,
        },
        maxBuffer: 16 << 20,
      });
      return { exitCode: 0, stdout, stderr };
    } catch (error) {
      const failed = error as { code?: unknown; stdout?: string; stderr?: string };
      if (typeof failed.code !== "number") throw error;
      return { exitCode: failed.code, stdout: failed.stdout ?? "", stderr: failed.stderr ?? "" };
    }
  }

  /** `cordon <args>` (the built CLI) in the project, as that user. */
  function cordon(who: Invoker, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Outcome> {
    return asUser(who, [process.execPath, cli, ...args], env);
  }

  async function containerUserOf(who: Invoker): Promise<string[]> {
    const mine = await dockerClient().listContainers({
      all: true,
      filters: { label: [`${labelKeys.home}=${who.cordonHome}`] },
    });
    return Promise.all(
      mine.map(async (info) => (await dockerClient().getContainer(info.Id).inspect()).Config.User),
    );
  }

  it.each([
    // The GitHub Actions runner: the sandbox runs as the runner's own uid.
    { who: "uid 1001", uid: 1001, sandboxUid: "1001" },
    { who: "uid 1000", uid: 1000, sandboxUid: "1000" },
    // Root hands its copy over to 1000 in a closed directory, as before.
    { who: "root", uid: 0, sandboxUid: "1000" },
  ])(
    "as $who: run edits the seeded copy, diff shows it, fix-tests verifies a fix",
    async ({ uid, sandboxUid }) => {
      const who = await invoker(uid);
      const prober = path.join(scripts, "prober.json");

      const edited = await cordon(who, [
        "run",
        "--session",
        "probe",
        "--model-script",
        prober,
        "fix the discount",
      ]);
      expect(edited.stderr).not.toMatch(/Permission denied/);
      expect(edited.exitCode, edited.stderr).toBe(0);
      const agentUser = sandboxUid === "1000" ? "1000:1000" : `${who.uid}:${who.gid}`;
      // The container's own user is its init's and keep-alive's, out of the agent's reach.
      expect(await containerUserOf(who)).toEqual(["65534:65534"]);

      // explain, as that user, says what the run got.
      const explained = await cordon(who, ["sandbox", "explain", "--session", "probe"]);
      expect(explained.exitCode, explained.stderr).toBe(0);
      expect(explained.stdout).toMatch(
        new RegExp(`^  user +${agentUser} \\(init and keep-alive: 65534:65534\\)$`, "m"),
      );
      expect(explained.stdout).toContain(
        `/home/sandbox (rw,nosuid,nodev,exec,size=512m,uid=${agentUser.replace(":", ",gid=")})`,
      );

      const diff = await cordon(who, ["diff", "--session", "probe"]);
      expect(diff.exitCode, diff.stderr).toBe(0);
      expect(diff.stdout).toContain(
        "-    return subtotal + discount\n+    return subtotal - discount",
      );
      // What the agent found inside: its uid, a HOME and caches it can write, a name for tools.
      expect(diff.stdout).toContain("+uid " + sandboxUid);
      expect(diff.stdout).toContain("+home /home/sandbox");
      expect(diff.stdout).toContain("+name sandbox");
      expect(diff.stdout).toContain("+cache writable");
      expect(diff.stdout).toContain("+npm cache /home/sandbox/.npm");
      // The user's project is untouched.
      expect(await readFile(path.join(who.repo, "pricing.py"), "utf8")).toContain(
        "return subtotal + discount",
      );

      const out = path.join(who.root, "fix-tests-out");
      const fixed = await cordon(who, [
        "fix-tests",
        "--test-cmd",
        "python3 -m unittest -v",
        "--out",
        out,
        "--model-script",
        example("demo", "script.json"),
      ]);
      expect(fixed.exitCode, fixed.stderr).toBe(0);
      const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as {
        status: string;
        filesChanged: { path: string }[];
      };
      expect(result.status).toBe("fixed");
      expect(result.filesChanged.map((f) => f.path)).toEqual(["pricing.py"]);
      // The artifacts are the invoking user's to read and upload.
      expect((await stat(path.join(out, "changes.patch"))).uid).toBe(who.uid);
    },
  );

  it("as uid 1001, a sandbox user that cannot write the copy is refused before any model call", async () => {
    const who = await invoker(1001);
    const config = path.join(who.root, "config.json5");
    // A config written for a desktop (uid 1000) used on the runner.
    await writeFile(
      config,
      '{ agents: { defaults: { sandbox: { docker: { user: "1000:1000" } } } } }',
    );
    await chown(config, who.uid, who.gid);
    const refused = await cordon(
      who,
      [
        "run",
        "--session",
        "wrong-user",
        "--model-script",
        example("demo", "script.json"),
        "fix it",
      ],
      { CORDON_CONFIG: config },
    );
    expect(refused.exitCode).toBe(3);
    expect(refused.stderr).toMatch(
      /the sandbox user 1000:1000 cannot write \/workspace .*owner 1001:/,
    );
    expect(refused.stderr).toMatch(/set sandbox\.docker\.user to "auto" \(cordon runs as uid 1001/);
    // No turn was taken: the scripted model's first line was never printed, no transcript holds a turn.
    expect(refused.stdout + refused.stderr).not.toContain("I'll start by running the test suite");
    const sessions = path.join(who.cordonHome, "sessions");
    const transcripts = await readdir(sessions, { recursive: true }).catch(() => []);
    for (const file of transcripts.filter((f) => String(f).endsWith(".jsonl"))) {
      expect(await readFile(path.join(sessions, String(file)), "utf8")).not.toContain(
        '"assistant"',
      );
    }
  });

  it("as uid 1001, fix-tests with a CORDON_HOME it cannot write exits 3 naming the path and the remedy", async () => {
    const who = await invoker(1001);
    // A state directory another user made (root's, mode 755): readable, not writable for 1001.
    const home = path.join(who.root, "root-owned-home");
    await mkdir(home, { mode: 0o755 });
    const out = path.join(who.root, "unwritable-home-out");
    const failed = await cordon(
      who,
      [
        "fix-tests",
        "--test-cmd",
        "python3 -m unittest",
        "--model-script",
        example("demo", "script.json"),
        "--out",
        out,
      ],
      { CORDON_HOME: home },
    );
    expect(failed.exitCode, failed.stderr).toBe(3);
    expect(failed.stdout).toContain("EACCES: permission denied");
    expect(failed.stderr).toMatch(
      new RegExp(
        `fix: make ${home}/\\S+ writable for the user running cordon \\(uid 1001\\), or set CORDON_HOME to a directory that user owns`,
      ),
    );
    // Nothing to clean up is not news: no "could not remove the sandbox" lines.
    expect(failed.stderr).not.toContain("could not remove");
    const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as {
      status: string;
      exitCode: number;
      fix?: string;
    };
    expect(result).toMatchObject({ status: "error", exitCode: 3 });
    expect(result.fix).toContain("set CORDON_HOME");
  });

  it("as uid 1001, the disk budget is watched (no mount without root) and a copy past it starts no sandbox, even with its bytes behind a directory it made unreadable, which sandbox rm deletes all the same", async () => {
    const who = await invoker(1001);
    const config = path.join(who.root, "config.json5");
    await writeFile(config, '{ agents: { defaults: { sandbox: { disk: "16m" } } } }');
    await chown(config, who.uid, who.gid);
    const filler = path.join(who.root, "filler.json");
    await writeFile(
      filler,
      JSON.stringify({
        version: 1,
        model: "scripted-filler",
        turns: [
          {
            content: [
              {
                type: "tool_use",
                name: "exec",
                // Hidden from cordon's own user: a du of uid 1001 on the host could not list
                // `hide`, and counted none of it (the budget was bypassed until it was measured
                // in a container that may read everything).
                input: {
                  command:
                    "mkdir hide && head -c 30000000 /dev/urandom > hide/blob.bin && chmod 000 hide",
                },
              },
            ],
          },
          { content: [{ type: "text", text: "Wrote 30 MB." }] },
        ],
      }),
    );
    const env = { CORDON_CONFIG: config };
    const first = await cordon(
      who,
      ["run", "--session", "fill", "--model-script", filler, "fill"],
      env,
    );
    expect(first.stderr).toMatch(
      /sandbox\.disk is not enforced: cordon runs without the right to mount/,
    );
    // Not a mount: a plain directory cordon measures.
    const mounts = await readFile("/proc/self/mounts", "utf8");
    expect(mounts).not.toContain(who.cordonHome);

    const again = await cordon(
      who,
      ["run", "--session", "fill", "--model-script", example("demo", "script.json"), "more"],
      env,
    );
    expect(again.exitCode).toBe(3);
    expect(again.stderr).toMatch(
      /wrote \d+ MiB to its private workspace .*more than sandbox\.disk allows \(16 MiB\)/,
    );

    // The warning comes once, when a sandbox is made: not again on each command that reuses it.
    const made = await cordon(who, ["exec", "--session", "quiet", "--", "true"], env);
    expect(made.stderr).toMatch(/sandbox\.disk is not enforced/);
    const reused = await cordon(who, ["exec", "--session", "quiet", "--", "true"], env);
    expect(reused.exitCode).toBe(0);
    expect(reused.stderr).not.toMatch(/is not enforced/);

    // Removal deletes the copy all the same, its unreadable directory too, as uid 1001 (rm alone
    // cannot list `hide`); the access it gives back never follows a link out of the copy (put in
    // by hand: the sandbox, over its budget, starts no more).
    const outside = path.join(who.root, "outside");
    await mkdir(outside, { mode: 0o000 });
    await chown(outside, who.uid, who.gid);
    const workspaces = path.join(who.cordonHome, "workspaces");
    const [copy] = (await readdir(workspaces)).filter(
      (name) => name.includes("-fill-") && !name.startsWith("."),
    );
    expect(copy).toBeDefined();
    await run("setpriv", [
      `--reuid=${who.uid}`,
      `--regid=${who.gid}`,
      "--clear-groups",
      "ln",
      "-s",
      outside,
      path.join(workspaces, copy ?? "", "out"),
    ]);
    const removed = await cordon(who, ["sandbox", "rm", "--all", "--discard-changes"], env);
    expect(removed.exitCode, removed.stderr).toBe(0);
    expect((await readdir(workspaces)).filter((name) => name.includes("-fill-"))).toEqual([]);
    expect((await stat(outside)).mode & 0o777).toBe(0);
  });

  it("as uid 1001, the GitHub Actions recipe's own steps fix the tests and write the job summary", async () => {
    const who = await invoker(1001);
    const workflow = parseYaml(
      await readFile(example("github-actions", "fix-tests.yml"), "utf8"),
    ) as { jobs: Record<string, { steps: { name?: string; run?: string }[] }> };
    const steps = Object.values(workflow.jobs).flatMap((job) => job.steps);
    const script = (marker: string): string => {
      const step = steps.find((s) => s.run?.includes(marker));
      if (!step?.run) throw new Error(`the recipe has no step that runs ${marker}`);
      return step.run;
    };
    // `cordon` as the install step leaves it on PATH (no registry package yet: the built CLI).
    const bin = path.join(who.root, "bin");
    await mkdir(bin);
    await writeFile(
      path.join(bin, "cordon"),
      `#!/bin/sh\nexec '${process.execPath}' '${cli}' "$@"\n`,
      { mode: 0o755 },
    );
    const stepSummary = path.join(who.root, "step-summary.md");
    await writeFile(stepSummary, "");
    await run("chown", ["-R", `${who.uid}:${who.gid}`, bin, stepSummary]);

    // The model behind ANTHROPIC_API_KEY: a Messages API server playing the demo's fix.
    const demo = JSON.parse(await readFile(example("demo", "script.json"), "utf8")) as {
      turns: {
        content: (
          { type: "text"; text: string } | { type: "tool_use"; name: string; input: unknown }
        )[];
      }[];
    };
    const server = await startMessagesApiServer();
    try {
      let toolUses = 0;
      server.enqueue(
        ...demo.turns.map((turn) => ({
          kind: "message" as const,
          content: turn.content.map((block) =>
            block.type === "text" ? block : { ...block, id: `toolu_demo_${++toolUses}` },
          ),
        })),
      );
      // As the runner runs a step: bash -e, in the checkout, the secret in the environment.
      const env = {
        PATH: `${bin}:${process.env["PATH"] ?? ""}`,
        ANTHROPIC_API_KEY: "sk-test-recipe",
        ANTHROPIC_BASE_URL: server.url,
        GITHUB_STEP_SUMMARY: stepSummary,
      };
      const bash = (text: string) =>
        asUser(who, ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", text], env);
      const installed = await bash(
        script("cordon doctor")
          .split("\n")
          .filter((line) => !line.startsWith("npm install"))
          .join("\n"),
      );
      expect(installed.exitCode, installed.stdout + installed.stderr).toBe(0);

      const fixed = await bash(script("cordon fix-tests"));
      expect(fixed.exitCode, fixed.stderr).toBe(0);
      expect(server.pending).toBe(0);
      // The secret reached the model API from the runner (it never enters the sandbox).
      expect(server.requests[0]?.headers["authorization"]).toBe("Bearer sk-test-recipe");
      const artifacts = path.join(who.repo, "cordon-artifacts");
      const result = JSON.parse(await readFile(path.join(artifacts, "result.json"), "utf8")) as {
        status: string;
      };
      expect(result.status).toBe("fixed");
      expect(await readFile(path.join(artifacts, "changes.patch"), "utf8")).toContain(
        "+    return subtotal - discount",
      );

      const summarized = await bash(script("GITHUB_STEP_SUMMARY"));
      expect(summarized.exitCode).toBe(0);
      expect(await readFile(stepSummary, "utf8")).toBe(
        await readFile(path.join(artifacts, "summary.md"), "utf8"),
      );
    } finally {
      await server.close();
    }
  });
});
