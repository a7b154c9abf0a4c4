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

  it("includes AGENTS.md up to its cap and says when it cut it", () => {
    const small = buildSystemPrompt({ ...base, agentsMd: "Use pnpm." });
    expect(small).toMatch(/## Project instructions \(AGENTS.md\)\n\nUse pnpm\./);
    const big = buildSystemPrompt({ ...base, agentsMd: "y".repeat(500), agentsMdMaxChars: 100 });
    expect(big).toMatch(/y{100}\n\n\[AGENTS.md truncated: 400 more characters not shown\]/);
    expect(big).not.toMatch(/y{101}/);
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
