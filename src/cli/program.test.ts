import { describe, expect, it } from "vitest";

import { ExitCode, createSilentLogger } from "../common/index.js";
import type { CliContext } from "./context.js";
import { createProgram, invokedCommand } from "./program.js";

function context(): CliContext {
  return {
    env: {},
    logger: createSilentLogger(),
    stdout: () => undefined,
    stderr: () => undefined,
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
    for (const name of summaries) {
      const program = await createProgram(context(), ["node", "cordon", name]);
      // The loaded module defines the command under the same name, once, in the same place.
      expect(program.commands.map((c) => c.name())).toEqual(summaries);
      const command = program.commands.find((c) => c.name() === name);
      const defined = (command?.options.length ?? 0) + (command?.commands.length ?? 0);
      expect(defined, `${name} has its options or subcommands`).toBeGreaterThan(0);
    }
  });
});
