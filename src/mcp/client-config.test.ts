import { describe, expect, it } from "vitest";

import { claudeRecipe, clientConfig } from "./client-config.js";

const stdio = { kind: "stdio" as const, command: "cordon", args: ["mcp", "--session", "task 1"] };
const http = {
  kind: "http" as const,
  url: "http://127.0.0.1:8765/mcp",
  tokenVariable: "CORDON_MCP_TOKEN",
};

describe("cordon mcp --print-config", () => {
  it("writes Claude Code's and Cursor's mcpServers JSON", () => {
    expect(JSON.parse(clientConfig("claude", stdio))).toEqual({
      mcpServers: {
        cordon: { type: "stdio", command: "cordon", args: ["mcp", "--session", "task 1"] },
      },
    });
    expect(JSON.parse(clientConfig("cursor", stdio))).toEqual({
      mcpServers: { cordon: { command: "cordon", args: ["mcp", "--session", "task 1"] } },
    });
  });

  it("refers to the HTTP token by its variable, in each client's syntax, never by value", () => {
    expect(JSON.parse(clientConfig("claude", http))).toEqual({
      mcpServers: {
        cordon: {
          type: "http",
          url: http.url,
          headers: { Authorization: "Bearer ${CORDON_MCP_TOKEN}" },
        },
      },
    });
    expect(clientConfig("cursor", http)).toContain('"Bearer ${env:CORDON_MCP_TOKEN}"');
    expect(clientConfig("codex", http)).toBe(
      '[mcp_servers.cordon]\nurl = "http://127.0.0.1:8765/mcp"\nbearer_token_env_var = "CORDON_MCP_TOKEN"\n',
    );
  });

  it("writes Codex's TOML table with quoted arguments", () => {
    expect(clientConfig("codex", { ...stdio, args: ["mcp", "--workspace", '/a "b"'] })).toBe(
      '[mcp_servers.cordon]\ncommand = "cordon"\nargs = ["mcp", "--workspace", "/a \\"b\\""]\n',
    );
  });

  it("gives claude -p only cordon's tools, the task right after -p", () => {
    const recipe = claudeRecipe("cordon.mcp.json", ["exec", "write"]);
    expect(recipe).toMatch(/^claude -p "TASK" --mcp-config cordon\.mcp\.json /);
    expect(recipe).toContain("--allowedTools mcp__cordon__exec,mcp__cordon__write ");
    expect(recipe).toMatch(/--disallowedTools Bash,.*Edit,.*Write,/);
  });
});
