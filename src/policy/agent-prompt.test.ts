import { describe, expect, it } from "vitest";

import { normalizeAgentId } from "../config/index.js";
import { bootstrapFilesFor } from "./bootstrap-files.js";
import { explainPlan } from "./explain.js";
import { plan } from "./testing/plan-fixtures.js";

describe("agent ids", () => {
  it.each([
    ["ops", "ops"],
    ["Ops Team", "ops-team"],
    ["  Reviewer  ", "reviewer"],
    ["a/b\\c:d", "a-b-c-d"],
    ["--x__", "x"],
    ["Ünïcode agent", "n-code-agent"],
    ["x".repeat(70), "x".repeat(64)],
    [`${"y".repeat(63)}-z`, "y".repeat(63)],
    ["!!!", ""],
  ])("%j normalises to %j", (written, normalised) => {
    expect(normalizeAgentId(written)).toBe(normalised);
  });

  it("a run uses the normalised id, found however --agent spells it; explain shows what was written", () => {
    const config = { agents: { list: [{ id: "Ops Team", default: true }, { id: "ci" }] } };
    const byDefault = plan(config);
    expect(byDefault.agent.id).toBe("ops-team");
    expect(byDefault.sessionKey).toBe("agent:ops-team:main");
    expect(plan(config, { agentId: "OPS team" }).agent.id).toBe("ops-team");
    expect(explainPlan(byDefault)).toMatch(/^agent {5}ops-team \(written "Ops Team"\)$/m);
    expect(explainPlan(plan(config, { agentId: "ci" }))).toMatch(/^agent {5}ci$/m);
  });
});

describe("prompt modes", () => {
  const files = ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "BOOTSTRAP.md"];

  it("full reads every configured file, minimal AGENTS.md and TOOLS.md, none nothing", () => {
    expect(bootstrapFilesFor("full", files)).toEqual(files);
    expect(bootstrapFilesFor("minimal", files)).toEqual(["AGENTS.md", "TOOLS.md"]);
    expect(bootstrapFilesFor("none", files)).toEqual([]);
  });

  it("an agent's own mode and file list beat the defaults; explain names them", () => {
    const config = {
      agents: {
        defaults: { promptMode: "minimal" as const, bootstrap: { maxBytes: 4096 } },
        list: [
          { id: "main", default: true },
          { id: "bare", promptMode: "none" as const },
          { id: "notes", promptMode: "full" as const, bootstrap: { files: ["NOTES.md"] } },
        ],
      },
    };
    expect(plan(config).agent).toMatchObject({
      promptMode: "minimal",
      bootstrap: { files, maxBytes: 4096 },
    });
    expect(explainPlan(plan(config))).toMatch(
      /^prompt {4}minimal; workspace files AGENTS.md, TOOLS.md \(read in the sandbox, 4 KiB each at most\) \(agents\.defaults\.promptMode\)$/m,
    );
    expect(explainPlan(plan(config, { agentId: "bare" }))).toMatch(
      /^prompt {4}none; no workspace files \(agents\.list\[\d\]\.promptMode\)$/m,
    );
    expect(plan(config, { agentId: "notes" }).agent.bootstrap).toEqual({
      files: ["NOTES.md"],
      maxBytes: 4096,
    });
  });
});

describe("explain's tool decisions", () => {
  it("stay in columns when a tool's name is longer than the built-in ones", () => {
    const text = explainPlan(plan({ tools: { profile: "full" } }));
    const rows = text.split("\n").filter((line) => /^ {2}(allow|deny ) /.test(line));
    expect(rows.some((row) => row.includes("sessions_spawn"))).toBe(true);
    // Every layer name starts in the same column, whatever the tool's name.
    const layerColumns = new Set(
      rows.map((row) => 8 + (/^\S+ +/.exec(row.slice(8))?.[0].length ?? 0)),
    );
    expect(layerColumns.size).toBe(1);
  });
});
