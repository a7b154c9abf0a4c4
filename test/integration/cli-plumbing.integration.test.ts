/**
 * The built CLI as a process in the places a shell puts it: a pipe whose reader leaves early, a
 * terminal (under script(1)) with and without NO_COLOR, a bad environment value.
 */
import { execFile, spawn } from "node:child_process";
import { appendFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { packageRoot } from "../../src/common/index.js";
import { demoRepo } from "../support/demo-repo.js";
import { removeStateDirectory } from "../support/state-directory.js";

const cli = path.join(packageRoot(), "dist", "cli", "main.js");
const escape = "\u001b[";

describe("the CLI process and its surroundings", () => {
  let home: string;
  let repo: string;
  let script: string;

  const env = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
    PATH: process.env["PATH"],
    HOME: process.env["HOME"],
    CORDON_HOME: home,
    ...extra,
  });

  beforeAll(async () => {
    home = await mkdtemp(path.join(tmpdir(), "cordon-plumbing-home-"));
    repo = await demoRepo();
    // A scripted model that answers at once.
    script = path.join(home, "script.json");
    await writeFile(
      script,
      JSON.stringify({
        version: 1,
        turns: [
          {
            content: [
              { type: "text", text: "Let me look around." },
              { type: "tool_use", name: "ls", input: { path: "." } },
            ],
          },
          { content: [{ type: "text", text: "All done." }] },
        ],
      }),
    );
  });

  afterAll(async () => {
    await promisify(execFile)(
      process.execPath,
      [cli, "sandbox", "rm", "--all", "--discard-changes"],
      { env: env() },
    );
    await removeStateDirectory(home);
    await rm(path.dirname(repo), { recursive: true, force: true });
  });

  it("ends quietly, as a SIGPIPE would, when the reader of its output goes away", async () => {
    const child = spawn(process.execPath, [cli, "help", "configuration"], {
      env: env(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    // The reader leaves before the first line: every write of the guide meets a closed pipe.
    child.stdout.destroy();
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(stderr).toBe("");
    expect(code).toBe(141);
  });

  it("refuses an unknown CORDON_LOG_LEVEL in one line with the levels it knows", async () => {
    const failed = await promisify(execFile)(process.execPath, [cli, "sandbox", "explain"], {
      cwd: repo,
      env: env({ CORDON_LOG_LEVEL: "verbose" }),
    }).then(
      () => ({ code: 0, stdout: "", stderr: "" }),
      (error: unknown) => error as { code: number; stdout: string; stderr: string },
    );
    expect(failed.code).toBe(2);
    expect(failed.stdout).toBe("");
    expect(failed.stderr).toBe(
      'cordon: CORDON_LOG_LEVEL="verbose" is not valid: expected one of fatal, error, warn, info, debug, trace, silent\n' +
        "  fix: set CORDON_LOG_LEVEL to one of fatal, error, warn, info, debug, trace, silent, or unset it\n",
    );
  });

  it("on a terminal prints a warning once, in colour unless NO_COLOR is set", async () => {
    // A repository's config with a corrupted trust store: loading it warns.
    await writeFile(path.join(repo, "cordon.json5"), `{ tools: { deny: ["exec"] } }`);
    await writeFile(path.join(home, "trusted-configs.json"), "{ not json");
    const onTerminal = async (extra: NodeJS.ProcessEnv): Promise<string> => {
      const command = `${JSON.stringify(process.execPath)} ${JSON.stringify(cli)} sandbox explain >/dev/null`;
      const { stdout } = await promisify(execFile)("script", ["-qec", command, "/dev/null"], {
        cwd: repo,
        env: env({ TERM: "xterm", ...extra }),
      });
      return stdout;
    };
    const plain = await onTerminal({ NO_COLOR: "1" });
    expect(plain.match(/trust store .* is not valid JSON/g)).toHaveLength(1);
    expect(plain).not.toContain(escape);
    const coloured = await onTerminal({});
    expect(coloured.match(/trust store .* is not valid JSON/g)).toHaveLength(1);
    expect(coloured).toContain(escape);
  });

  it("prints a sandbox warning once, not also as a log line and a progress line", async () => {
    // Only this warning: the config test's broken trust store and config go.
    await rm(path.join(home, "trusted-configs.json"), { force: true });
    await rm(path.join(repo, "cordon.json5"), { force: true });
    // A repository whose git config git cannot parse: seeding the private copy warns.
    await appendFile(path.join(repo, ".git", "config"), "[core\n broken");
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      [cli, "run", "--model-script", script, "--session", "warn-once", "say done"],
      { cwd: repo, env: env() },
    );
    // stdout carries the final answer only; the narration and the tool line go to stderr.
    expect(stdout).toBe("All done.\n");
    expect(stderr).toContain("Let me look around.\n");
    expect(stderr).toMatch(/^→ ls \.$/m);
    expect(stderr.match(/ignored the git config .* which git cannot parse/g)).toHaveLength(1);

    const quiet = await promisify(execFile)(
      process.execPath,
      [cli, "run", "--quiet", "--model-script", script, "--session", "quiet", "say done"],
      { cwd: repo, env: env() },
    );
    expect(quiet).toMatchObject({ stdout: "All done.\n", stderr: "" });
  });

  it("goes on with the project's most recent session with -c, and says when there is none", async () => {
    // After the test above, this project's latest session is "quiet".
    const run = (args: string[], cwd: string) =>
      promisify(execFile)(process.execPath, [cli, "run", ...args], { cwd, env: env() }).then(
        (done) => ({ code: 0, ...done }),
        (error: unknown) => error as { code: number; stdout: string; stderr: string },
      );
    const continued = await run(["-c", "--model-script", script, "and now?"], repo);
    expect(continued.code).toBe(0);
    expect(continued.stderr).toMatch(/^· continuing session agent:main:quiet$/m);
    expect(continued.stdout).toBe("All done.\n");
    const logs = await promisify(execFile)(
      process.execPath,
      [cli, "logs", "--session", "quiet", "--json"],
      { cwd: repo, env: env() },
    );
    expect(logs.stdout.match(/"type":"run-start"/g)).toHaveLength(2);

    const fresh = await demoRepo();
    const none = await run(["-c", "--model-script", script, "go on"], fresh);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/--continue: agent "main" has no session in .* yet/);
    expect(none.stderr).toContain('start one with `cordon run "TASK"`');
    await rm(path.dirname(fresh), { recursive: true, force: true });
  });

  it("builds the sandbox of a run from CORDON_BASE_IMAGE, as image and doctor do", async () => {
    // A base that is nowhere (a registry that does not listen): the run cannot quietly use the
    // default base instead.
    const base = "localhost:1/cordon-no-such-base:1";
    const failed = await promisify(execFile)(
      process.execPath,
      [cli, "run", "--model-script", script, "--session", "base", "hi"],
      { cwd: repo, env: env({ CORDON_BASE_IMAGE: base }) },
    ).then(
      () => ({ code: 0, stderr: "" }),
      (error: unknown) => error as { code: number; stderr: string },
    );
    expect(failed.code).toBe(3);
    expect(failed.stderr).toContain(`no base image for the sandbox image: ${base} is not present`);
    expect(failed.stderr).toContain("unset CORDON_BASE_IMAGE");
  });
});
