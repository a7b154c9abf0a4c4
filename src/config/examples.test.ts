import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { describe, expect, it } from "vitest";

import { planRun, type RunPlan } from "../policy/index.js";
import { hostEntryKind, hostRealpath, loadConfig } from "./index.js";

const examples = path.resolve(fileURLToPath(import.meta.url), "../../../examples/config");
const home = "/home/tester";
const stateDir = "/home/tester/.cordon";

async function plansOf(file: string): Promise<Map<string, RunPlan[]>> {
  const { config } = await loadConfig({
    cwd: "/",
    env: {},
    configPath: path.join(examples, file),
    homeDir: home,
  });
  const ids = config.agents.list.length ? config.agents.list.map((a) => a.id) : ["main"];
  return new Map(
    ids.map((agentId) => [
      agentId,
      [undefined, "task-1", "task-2"].map((sessionKey) =>
        planRun({
          config,
          agentId,
          sessionKey,
          stateDir,
          homeDir: home,
          realpath: hostRealpath,
          entryKind: hostEntryKind,
        }),
      ),
    ]),
  );
}

function only<T>(values: T[] | undefined): T[] {
  if (!values) throw new Error("missing agent");
  return values;
}

describe("examples/config", () => {
  it("has the examples the docs point at", () => {
    expect(readdirSync(examples).sort()).toEqual([
      "ci-strict.json5",
      "ops-multi-agent.json5",
      "single-agent.json5",
      "trusted-mode-off.json5",
    ]);
  });

  it("single-agent: every session sandboxed alone on a seeded private copy", async () => {
    const [main, one, two] = only((await plansOf("single-agent.json5")).get("main"));
    expect(main?.agent.workspace).toBe(examples);
    expect(main?.agent.model).toEqual({
      primary: "claude-sonnet-4-5",
      fallbacks: ["claude-haiku-4-5"],
    });
    for (const plan of [main, one, two]) {
      expect(plan?.sandbox.spec).toMatchObject({
        scope: "session",
        workspaceAccess: "none",
        seed: true,
      });
      expect(plan?.warnings).toEqual([]);
    }
    expect(one?.sandbox.spec?.containerName).not.toBe(two?.sandbox.spec?.containerName);
  });

  it("ops-multi-agent: ops shares a container with exec, triage reads only, ci gets fresh copies", async () => {
    const plans = await plansOf("ops-multi-agent.json5");
    const [opsMain, opsOne] = only(plans.get("ops"));
    expect(opsMain?.sandbox.spec?.scopeKey).toMatch(/^agent:ops@[0-9a-f]{16}$/);
    expect(opsOne?.sandbox.spec?.containerName).toBe(opsMain?.sandbox.spec?.containerName);
    expect(opsMain?.tools.allowed).toEqual(expect.arrayContaining(["exec", "process"]));
    expect(opsMain?.sandbox.spec?.docker).toMatchObject({
      network: "bridge",
      memoryBytes: 2 * 1024 ** 3,
    });
    expect(opsMain?.sandbox.prune.idleMs).toBe(72 * 3_600_000);

    const [triage] = only(plans.get("triage"));
    expect(triage?.agent.id).toBe("triage");
    expect(triage?.tools.allowed).toEqual(["read", "ls", "find", "grep"]);
    expect(triage?.sandbox.spec?.mounts.find((m) => m.target === "/agent")).toMatchObject({
      readOnly: true,
    });

    const [ci, ciOne, ciTwo] = only(plans.get("ci"));
    expect(ci?.sandbox.spec).toMatchObject({
      scope: "session",
      workspaceAccess: "none",
      seed: true,
    });
    expect(ci?.sandbox.spec?.docker.network).toBe("none");
    expect(ci?.tools.allowed).not.toContain("process");
    expect(ci?.tools.exec.timeoutSec).toBe(900);
    expect(ciOne?.sandbox.spec?.containerName).not.toBe(ciTwo?.sandbox.spec?.containerName);
  });

  it("ci-strict: no network, no process tool, limits on, defaults' tmpfs kept", async () => {
    const [main] = only((await plansOf("ci-strict.json5")).get("main"));
    expect(main?.warnings).toEqual([]);
    expect(main?.tools.allowed).toEqual([
      "exec",
      "read",
      "write",
      "edit",
      "apply_patch",
      "ls",
      "find",
      "grep",
    ]);
    expect(main?.sandbox.spec?.docker).toMatchObject({
      network: "none",
      readOnlyRoot: true,
      capDrop: ["ALL"],
      // "auto": the invoking user with a private copy, 1000:1000 when that is root.
      user: process.getuid?.() === 0 ? "1000:1000" : `${process.getuid?.()}:${process.getgid?.()}`,
      memoryBytes: 2 * 1024 ** 3,
      memorySwapBytes: 2 * 1024 ** 3,
      pidsLimit: 512,
      env: {
        HOME: "/home/sandbox",
        USER: "sandbox",
        LOGNAME: "sandbox",
        CI: "true",
        LANG: "C.UTF-8",
      },
    });
    expect(Object.keys(main?.sandbox.spec?.docker.tmpfs ?? {}).sort()).toEqual([
      "/home/sandbox",
      "/run",
      "/tmp",
      "/var/tmp",
    ]);
    expect(main?.sandbox.spec?.containerName).toMatch(/^cordon-ci-/);
  });

  it("trusted-mode-off: nothing sandboxed, and the plan says so", async () => {
    for (const plan of only((await plansOf("trusted-mode-off.json5")).get("main"))) {
      expect(plan.sandbox.enabled).toBe(false);
      expect(plan.sandbox.spec).toBeUndefined();
      expect(plan.warnings.join("\n")).toMatch(/sandbox mode is off/);
    }
  });
});
