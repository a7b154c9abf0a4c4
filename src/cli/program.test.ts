import { describe, expect, it } from "vitest";

import { ExitCode, createSilentLogger } from "../common/index.js";
import type { CliContext } from "./context.js";
import { createProgram, invokedCommand } from "./program.js";
import { plain } from "./render/colors.js";
import { runCli } from "./run-cli.js";

function context(): CliContext {
  return {
    env: {},
    logger: createSilentLogger(),
    stdout: () => undefined,
    stderr: () => undefined,
    paint: { stdout: plain, stderr: plain },
    outputShared: false,
    readStdin: () => Promise.resolve(""),
    exitCode: ExitCode.success,
  };
}

const topLevel = async (argv: string[]): Promise<string[]> =>
  (await createProgram(context(), ["node", "cordon", ...argv])).commands.map((c) => c.name());

describe("the lazily loaded command tree", () => {
  it("finds the command word past options and `help`", () => {
    expect(invokedCommand(["node", "cordon", "--version"])).toBeUndefined();
    expect(invokedCommand(["node", "cordon", "run", "--model", "m", "task"])).toBe("run");
    expect(invokedCommand(["node", "cordon", "help", "sandbox"])).toBe("sandbox");
    expect(invokedCommand(["node", "cordon", "--help", "diff"])).toBe("diff");
  });

  it("registers each command in full where it is invoked, under the name its summary lists", async () => {
    const summaries = await topLevel(["--help"]);
    expect(summaries).toContain("run");
    for (const name of summaries.filter((n) => n !== "help")) {
      const program = await createProgram(context(), ["node", "cordon", name]);
      // The loaded module defines the command under the same name, once, in the same place.
      expect(program.commands.map((c) => c.name())).toEqual(summaries);
      const command = program.commands.find((c) => c.name() === name);
      const defined =
        (command?.options.length ?? 0) +
        (command?.commands.length ?? 0) +
        (command?.registeredArguments.length ?? 0);
      expect(defined, `${name} has its options, subcommands or arguments`).toBeGreaterThan(0);
    }
    // Imports every command module: slow on a loaded machine.
  }, 60_000);
});

describe("cordon help", () => {
  async function help(...names: string[]): Promise<{ code: number; out: string; err: string }> {
    let out = "";
    let err = "";
    const code = await runCli(
      ["node", "cordon", "help", ...names],
      { CORDON_LOG_LEVEL: "silent" },
      { stdout: (t) => (out += t), stderr: (t) => (err += t) },
    );
    return { code, out, err };
  }

  it("prints a guide the package ships for a topic, and lists the topics under --help", async () => {
    const topic = await help("configuration");
    expect(topic.code).toBe(0);
    expect(topic.out).toMatch(/^# /);
    expect(topic.out).toContain("agents.defaults.sandbox");
    expect((await help()).out).toMatch(/Help topics \(cordon help <topic>\):\n {2}configuration/);
  });

  it("prints a subcommand's help, and names the topics for an unknown name", async () => {
    const list = await help("sandbox", "list");
    expect(list.code).toBe(0);
    expect(list.out).toMatch(/^Usage: cordon sandbox list \[options\]/);
    const unknown = await help("sandbox", "lsit");
    expect(unknown.code).toBe(2);
    expect(unknown.err).toMatch(/no command or help topic "sandbox lsit"/);
    expect(unknown.err).toMatch(
      /topics are configuration, scripted-model, library, network, images, runtimes, gvisor, exit-codes/,
    );
  });
});
