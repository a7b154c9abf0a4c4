import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { ExitCode, createSilentLogger } from "../common/index.js";
import { completionScript } from "./completion-scripts.js";
import type { CliContext } from "./context.js";
import { createFullProgram } from "./program.js";
import { plain } from "./render/colors.js";

const context: CliContext = {
  env: {},
  logger: createSilentLogger(),
  stdout: () => undefined,
  stderr: () => undefined,
  readStdin: () => Promise.resolve(""),
  paint: { stdout: plain, stderr: plain },
  outputShared: false,
  exitCode: ExitCode.success,
};

let dir: string;
let bashScript: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "cordon-completion-"));
  bashScript = path.join(dir, "cordon.bash");
  await writeFile(bashScript, completionScript(await createFullProgram(context), "bash"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** What bash offers after `words` (the last one being completed), with the script sourced. */
async function complete(...words: string[]): Promise<string[]> {
  const line = ["cordon", ...words].map((word) => `'${word}'`).join(" ");
  const { stdout } = await promisify(execFile)("bash", [
    "--norc",
    "-c",
    `source "$1"; COMP_WORDS=(${line}); COMP_CWORD=${words.length}; _cordon; printf '%s\\n' "\${COMPREPLY[@]}"`,
    "bash",
    bashScript,
  ]);
  return stdout.split("\n").filter(Boolean);
}

describe("cordon completion bash, sourced in bash", () => {
  it("completes subcommands at every level", async () => {
    expect(await complete("se")).toEqual(["setup", "sessions"]);
    expect(await complete("sandbox", "")).toEqual(
      expect.arrayContaining(["list", "explain", "rm", "prune", "--help"]),
    );
    expect(await complete("sessions", "l")).toEqual(["list"]);
    expect(await complete("completion", "")).toEqual(["bash", "zsh", "fish", "--help"]);
  });

  it("completes a command's flags, and the values of a flag with fixed choices", async () => {
    expect(await complete("run", "--output")).toEqual(["--output-format"]);
    expect(await complete("run", "--output-format", "")).toEqual(["text", "json", "stream-json"]);
    // The flags are the command's own: run's are not offered after diff.
    expect(await complete("diff", "--output")).toEqual([]);
    expect(await complete("sessions", "list", "--n")).toEqual(["--names"]);
  });
});

describe("cordon completion zsh and fish", () => {
  it("list the same commands and flags", async () => {
    const program = await createFullProgram(context);
    for (const shell of ["zsh", "fish"] as const) {
      const script = completionScript(program, shell);
      expect(script, shell).toContain("fix-tests");
      expect(script, shell).toContain("output-format");
      expect(script, shell).toContain("stream-json");
    }
  });
});
