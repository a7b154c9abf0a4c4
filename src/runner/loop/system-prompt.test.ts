import { describe, expect, it } from "vitest";
import { buildSystemPrompt, type SystemPromptOptions } from "./system-prompt.js";

const base: SystemPromptOptions = {
  runtime: { agentName: "main", model: "claude-test", date: "2025-01-02" },
  sandbox: {
    sandboxed: true,
    mode: "all",
    workspaceAccess: "ro",
    network: false,
    workdir: "/workspace",
  },
  tools: [
    { name: "exec", description: "Run a shell command.\nMore detail." },
    { name: "read", description: "Read a file." },
  ],
};

describe("buildSystemPrompt", () => {
  it("states the sandbox facts with container paths and lists the tools", () => {
    const prompt = buildSystemPrompt(base);
    expect(prompt).toMatch(/isolated container \(sandbox mode: all\)/);
    expect(prompt).toMatch(/read-only at \/agent/);
    expect(prompt).toMatch(/Working directory: \/workspace/);
    expect(prompt).toMatch(/no network access/);
    expect(prompt).toMatch(/- exec: Run a shell command\.\n/);
    expect(prompt).not.toMatch(/More detail/);
    expect(prompt).toMatch(/## Safety/);
  });

  it("is deterministic, so the prompt cache keeps hitting", () => {
    expect(buildSystemPrompt(base)).toBe(buildSystemPrompt(structuredClone(base)));
  });

  it("includes the bootstrap files in order, and says where one was cut", () => {
    const prompt = buildSystemPrompt({
      ...base,
      bootstrapFiles: [
        { name: "AGENTS.md", content: "Use pnpm." },
        { name: "SOUL.md", content: "   " },
        { name: "TOOLS.md", content: "y".repeat(100), omittedBytes: 400 },
      ],
    });
    expect(prompt).toMatch(
      /## Workspace files\n\n.*\n\n### AGENTS.md\n\nUse pnpm\.\n\n### TOOLS.md\n\ny{100}\n\n\[TOOLS.md truncated: 400 more bytes not shown\]/,
    );
    expect(prompt).not.toMatch(/SOUL.md/);
  });

  it("mode none is one line of identity and the extra instructions, nothing else", () => {
    const prompt = buildSystemPrompt({
      ...base,
      mode: "none",
      bootstrapFiles: [{ name: "AGENTS.md", content: "Use pnpm." }],
      extra: "Answer in French.",
    });
    expect(prompt).toMatch(/^You are a coding agent[^\n]*\n\nAnswer in French\.\n$/);
  });

  it("describes host mode and rw access", () => {
    const prompt = buildSystemPrompt({
      ...base,
      sandbox: {
        sandboxed: false,
        mode: "off",
        workspaceAccess: "rw",
        network: true,
        workdir: "/workspace",
      },
      tools: [],
    });
    expect(prompt).toMatch(/run on the host/);
    expect(prompt).toMatch(/read-write; changes are live/);
    expect(prompt).toMatch(/Network access is available/);
    expect(prompt).toMatch(/No tools are available/);
  });
});
