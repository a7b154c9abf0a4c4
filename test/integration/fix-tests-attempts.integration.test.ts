/**
 * `cordon fix-tests --attempts N` in real containers: several agents at once on the demo
 * repository's failing test, each in its own copy and verified on its own clean copy. With a
 * wrong fix, an agent still working and a right fix, the right one wins (exit 0), the one still
 * working is stopped, all three are reported, and no attempt leaves a container or a private copy
 * behind. The order is the test's, not the clock's: the right fix's model waits at a gate the test
 * opens only when the CLI has reported the wrong fix's verdict. With no fix among them, the exit is today's failure exit and every attempt is reported.
 */
import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { closeSync, openSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { runCli } from "../../src/cli/run-cli.js";
import { packageRoot } from "../../src/common/index.js";
import { demoRepo, git } from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { removeStateDirectory } from "../support/state-directory.js";

interface AttemptJson {
  attempt: number;
  sessionKey: string;
  status: string;
  exitCode: number;
  message: string;
  won: boolean;
  turns: number;
  usage: { inputTokens: number; outputTokens: number };
  cost: { usd: number | null };
  filesChanged: string[];
  verification?: { exitCode: number | null };
  artifacts: string[];
}

interface ResultJson {
  status: string;
  exitCode: number;
  message: string;
  sessionKey: string;
  winner?: number;
  attempts?: AttemptJson[];
  filesChanged: { path: string }[];
  agent?: { model?: string };
}

const script = (name: string): string =>
  path.join(packageRoot(), "test", "fixtures", "fix-tests", "attempts", name);

describe("cordon fix-tests --attempts", () => {
  let home: string;
  let repo: string;
  const env = (): NodeJS.ProcessEnv => ({
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    ANTHROPIC_API_KEY: "",
  });

  beforeAll(async () => {
    await requireSandboxImage();
    home = await mkdtemp(path.join(tmpdir(), "cordon-attempts-home-"));
    repo = await demoRepo();
  });

  afterAll(async () => {
    // Only if a test failed midway: the runs remove their own.
    const docker = dockerClient();
    for (const info of await docker.listContainers({ all: true })) {
      if (info.Labels["cordon.home"] === home) {
        await docker
          .getContainer(info.Id)
          .remove({ force: true })
          .catch(() => undefined);
      }
    }
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  async function fixTests(out: string, ...extra: string[]) {
    return fixTestsWith(env(), out, ...extra);
  }

  const fixTestsArgs = (out: string, extra: string[]): string[] => [
    "fix-tests",
    "--workspace",
    repo,
    "--test-cmd",
    "python3 -m unittest -v",
    "--out",
    out,
    ...extra,
  ];

  async function fixTestsWith(environment: NodeJS.ProcessEnv, out: string, ...extra: string[]) {
    const run = await runCordon(fixTestsArgs(out, extra), environment);
    const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as ResultJson;
    return { run, result };
  }

  /**
   * fix-tests in this process, with `onStderr` told each progress line as it comes (runCordon
   * gives the output only at the end).
   */
  async function fixTestsWatching(out: string, extra: string[], onStderr: (line: string) => void) {
    let stdout = "";
    let stderr = "";
    const exitCode = await runCli(
      ["node", "cordon", ...fixTestsArgs(out, extra)],
      { ...process.env, CORDON_LOG_LEVEL: "silent", ...env() },
      {
        stdout: (text) => (stdout += text),
        stderr: (text) => {
          stderr += text;
          onStderr(text);
        },
        readStdin: () => Promise.resolve(""),
        confirm: () => Promise.resolve(undefined),
      },
    );
    const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as ResultJson;
    return { run: { exitCode, stdout, stderr }, result };
  }

  /** A copy of script `name` whose first model call waits until `gate` exists. */
  async function gatedScript(name: string, gate: string): Promise<string> {
    const json = JSON.parse(await readFile(script(name), "utf8")) as {
      turns: Record<string, unknown>[];
    };
    const first = json.turns[0];
    if (!first) throw new Error(`${name} has no turn`);
    first["waitForFile"] = gate;
    const file = path.join(home, `gated-${name}`);
    await writeFile(file, JSON.stringify(json));
    return file;
  }

  /** Containers of this job's sessions (the job key is every attempt's key's prefix), and copies. */
  async function leftBehind(
    result: ResultJson,
  ): Promise<{ containers: string[]; copies: string[] }> {
    const job = /fix-tests-[0-9a-f]{8}/.exec(result.sessionKey)?.[0] ?? "none";
    const containers = (await dockerClient().listContainers({ all: true }))
      .filter((info) => (info.Labels["cordon.session"] ?? "").includes(job))
      .map((info) => `${info.Names[0] ?? info.Id} (${info.Labels["cordon.session"] ?? ""})`);
    const copies = await readdir(path.join(home, "workspaces")).catch(() => []);
    return { containers, copies };
  }

  it("a wrong fix, an agent still working and a right fix: the right one wins, exit 0, all three reported, nothing left", async () => {
    const out = path.join(home, "three");
    // The right fix waits until the wrong fix's verdict is out: the gate opens on the CLI's line.
    const gate = path.join(home, "three.gate");
    let seen = "";
    const { run, result } = await fixTestsWatching(
      out,
      [
        "--attempts",
        "3",
        "--model-script",
        script("wrong-fix.json"),
        "--model-script",
        script("still-working.json"),
        "--model-script",
        await gatedScript("careful-fix.json", gate),
      ],
      (text) => {
        seen += text;
        // Any end of attempt 1 opens it (a wrong verdict then fails the assertions, not a wait).
        if (/· attempt 1 /.test(seen)) closeSync(openSync(gate, "a"));
      },
    );
    expect(run.exitCode, run.stderr).toBe(0);
    expect(result).toMatchObject({ status: "fixed", exitCode: 0, winner: 3 });
    expect(result.agent?.model).toBe("scripted-careful-fix");
    expect(result.filesChanged.map((file) => file.path)).toEqual(["pricing.py"]);
    const attempts = result.attempts ?? [];
    expect(attempts.map((attempt) => [attempt.attempt, attempt.status, attempt.won])).toEqual([
      // Its fix was verified and failed: the careful fix waited for that verdict at its gate.
      [1, "verification_failed", false],
      // Still waiting for its model when the right fix was verified: stopped.
      [2, "stopped", false],
      [3, "fixed", true],
    ]);
    expect(attempts[0]).toMatchObject({
      exitCode: 8,
      turns: 2,
      usage: { inputTokens: 1900, outputTokens: 80 },
      filesChanged: ["pricing.py"],
      verification: { exitCode: 1 },
    });
    expect(attempts[1]).toMatchObject({ turns: 1, usage: { inputTokens: 800 } });
    expect(attempts[1]?.message).toContain("attempt 3's fix was verified first");
    // Each attempt worked in a session of its own.
    expect(new Set(attempts.map((attempt) => attempt.sessionKey)).size).toBe(3);

    // The winner's patch is the job's; each attempt's own is beside it.
    expect(await readFile(path.join(out, "changes.patch"), "utf8")).toContain(
      "+    return subtotal - discount",
    );
    expect(await readFile(path.join(out, "attempt-1.patch"), "utf8")).toContain(
      "+    return subtotal + discount // 2",
    );
    expect(await readFile(path.join(out, "attempt-2.patch"), "utf8")).toBe("");
    const wrongTranscript = await readFile(path.join(out, "attempt-1.transcript.jsonl"), "utf8");
    expect(wrongTranscript).toContain("Halved the discount");
    const summary = await readFile(path.join(out, "summary.md"), "utf8");
    expect(summary).toContain("### Attempts");
    expect(summary).toContain("| 1 | verification failed | 2 | 1900 / 80 |");
    expect(summary).toContain("| 3 | 🏆 won: fixed and verified |");
    expect(run.stdout).toContain("Attempt 3 of 3 won.");
    // Each attempt worked in a fork of the copy the tests ran in.
    expect(run.stderr).toContain("3 agents at once, each in its own fork of this copy");
    expect(run.stderr).toContain("attempt 3 won: fixed and verified");

    // The user's repository is untouched; no attempt left a container or a private copy.
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(await leftBehind(result)).toEqual({ containers: [], copies: [] });
  });

  it("with the copies in engine volumes: the forks are volumes too, the right fix wins, and no volume is left", async () => {
    const out = path.join(home, "volumes");
    const config = path.join(home, "volumes.json5");
    await writeFile(
      config,
      '{ agents: { defaults: { sandbox: { workspaceStorage: "volume" } } } }\n',
    );
    const { run, result } = await fixTestsWith(
      { ...env(), CORDON_CONFIG: config },
      out,
      "--attempts",
      "2",
      "--model-script",
      script("wrong-fix.json"),
      "--model-script",
      script("careful-fix.json"),
    );
    expect(run.exitCode, run.stderr).toBe(0);
    expect(result).toMatchObject({ status: "fixed", exitCode: 0, winner: 2 });
    expect(result.filesChanged.map((file) => file.path)).toEqual(["pricing.py"]);
    expect(run.stderr).toContain("2 agents at once, each in its own fork of this copy");
    expect(await readFile(path.join(out, "changes.patch"), "utf8")).toContain(
      "+    return subtotal - discount",
    );
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(await leftBehind(result)).toEqual({ containers: [], copies: [] });
    const volumes = await dockerClient().listVolumes({
      filters: { label: [`cordon.home=${home}`, "cordon.volume-of"] },
    });
    expect((volumes.Volumes ?? []).map((volume) => volume.Name)).toEqual([]);
  });

  it("no fix among the attempts: exit 8 as with one, the furthest failure speaks, every attempt reported", async () => {
    const out = path.join(home, "none");
    const { run, result } = await fixTests(
      out,
      "--attempts",
      "2",
      "--model-script",
      script("wrong-fix.json"),
      "--model-script",
      script("looks-around.json"),
    );
    expect(run.exitCode, run.stderr).toBe(8);
    expect(result.status).toBe("verification_failed");
    expect(result.winner).toBeUndefined();
    expect(result.attempts?.map((attempt) => attempt.status)).toEqual([
      "verification_failed",
      "no_changes",
    ]);
    expect(result.message).toContain(
      "No attempt's fix was verified (attempt 1 verification failed; attempt 2 no changes)",
    );
    expect(await leftBehind(result)).toEqual({ containers: [], copies: [] });
  });
});
