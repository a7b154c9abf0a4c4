import { describe, expect, it } from "vitest";

import { ConfigError, ExitCode } from "../common/index.js";
import { ConfigValidationError, parseConfig } from "../config/index.js";
import { plan, project } from "./testing/plan-fixtures.js";

const carryConfig = (carry: string[], sandbox: Record<string, unknown> = {}) => ({
  agents: { defaults: { sandbox: { ...sandbox, carry } } },
});
const installed = {
  [`${project}/node_modules`]: "directory",
  [`${project}/.venv`]: "directory",
} as const;

function usageError(run: () => unknown): ConfigError {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error("expected a usage error");
}

describe("carried paths (sandbox.carry, --carry)", () => {
  it("puts the configured paths on the spec, each once and none inside another, and explains them", () => {
    const result = plan(carryConfig(["./node_modules/", ".venv", "node_modules/.bin"]), {
      entries: installed,
    });
    expect(result.sandbox.spec?.carry).toEqual([".venv", "node_modules"]);
    expect(result.sandbox.explanation.join("\n")).toContain(
      "carry .venv, node_modules (agents.defaults.sandbox.carry): copied from the workspace into the seeded copy, writable there, never part of a diff",
    );
    expect(result.warnings).toEqual([]);
  });

  it("lets --carry replace the config's list", () => {
    const result = plan(carryConfig([".venv"]), { entries: installed, carry: ["node_modules"] });
    expect(result.sandbox.spec?.carry).toEqual(["node_modules"]);
    expect(result.sandbox.explanation.join("\n")).toContain("carry node_modules (--carry)");
  });

  it("refuses a --carry path that does not exist with a usage error (exit 2) before anything starts", () => {
    const error = usageError(() => plan({}, { entries: installed, carry: ["node_moduels"] }));
    expect(error.exitCode).toBe(ExitCode.usage);
    expect(error.message).toBe(`--carry: node_moduels does not exist in the workspace ${project}`);
    expect(error.fix).toMatch(/spelling.*npm ci/);
  });

  it("warns about a configured path that does not exist, so one config serves projects without a .venv", () => {
    const result = plan(carryConfig(["node_modules", ".venv"]), {
      entries: { [`${project}/node_modules`]: "directory" },
    });
    expect(result.sandbox.spec?.carry).toEqual(["node_modules"]);
    expect(result.warnings).toEqual([
      `agents.defaults.sandbox.carry: .venv does not exist in the workspace ${project}; nothing is carried for it`,
    ]);
  });

  it.each([
    ["/etc", /relative to the agent workspace/],
    ["../secrets", /no `\.\.`/],
    ["a/../../b", /no `\.\.`/],
    [".", /whole workspace/],
    [".git", /sanitized/],
    [".git/hooks", /sanitized/],
  ])("refuses %s in a config file and as a flag", (value, message) => {
    expect(() => parseConfig(carryConfig([value]), { cwd: project, homeDir: "/home/u" })).toThrow(
      ConfigValidationError,
    );
    expect(usageError(() => plan({}, { carry: [value] })).message).toMatch(message);
  });

  it("warns that a symlinked path is carried as the link itself", () => {
    const result = plan(
      {},
      {
        entries: { [`${project}/node_modules`]: "symlink" },
        carry: ["node_modules"],
      },
    );
    expect(result.sandbox.spec?.carry).toEqual(["node_modules"]);
    expect(result.warnings.join("\n")).toContain(
      "--carry: node_modules is a symlink; the copy gets the link itself, not what it points at",
    );
  });

  it("carries nothing, with a warning, where there is no seeded copy", () => {
    for (const sandbox of [{ workspaceAccess: "rw" }, { seed: false }]) {
      const result = plan(carryConfig(["node_modules"], sandbox), { entries: installed });
      expect(result.sandbox.spec?.carry).toEqual([]);
      expect(result.warnings.join("\n")).toMatch(
        /agents\.defaults\.sandbox\.carry is ignored: it fills a seeded private copy/,
      );
    }
  });

  it("does not change the container's config hash: carrying fills a copy once and shapes no container", () => {
    const without = plan({}, { entries: installed });
    const withCarry = plan({}, { entries: installed, carry: ["node_modules"] });
    expect(withCarry.sandbox.spec?.configHash).toBe(without.sandbox.spec?.configHash);
  });
});
