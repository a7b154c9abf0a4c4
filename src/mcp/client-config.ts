/** The MCP clients `cordon mcp --print-config` writes a snippet for. */
export const mcpClients = ["claude", "cursor", "codex"] as const;
export type McpClient = (typeof mcpClients)[number];

/** How the client reaches cordon: it starts `cordon mcp` (stdio), or connects to `--http`. */
export type McpEndpoint =
  | { kind: "stdio"; command: string; args: readonly string[] }
  | {
      kind: "http";
      url: string;
      /** The variable the client reads the bearer token from (never the token itself). */
      tokenVariable: string;
    };

/** The name the server has in the client: tools appear as `mcp__cordon__exec` in Claude Code. */
export const serverName = "cordon";

/**
 * The client's own config for this server: Claude Code's `--mcp-config`/`.mcp.json` and Cursor's
 * `.cursor/mcp.json` (JSON, `mcpServers`), Codex's `~/.codex/config.toml` (`[mcp_servers.cordon]`).
 * A token is referred to by its variable, in each client's own syntax, so no file holds it.
 */
export function clientConfig(client: McpClient, endpoint: McpEndpoint): string {
  if (client === "codex") return codexToml(endpoint);
  const server =
    endpoint.kind === "stdio"
      ? {
          ...(client === "claude" ? { type: "stdio" } : {}),
          command: endpoint.command,
          args: [...endpoint.args],
        }
      : {
          ...(client === "claude" ? { type: "http" } : {}),
          url: endpoint.url,
          headers: {
            Authorization:
              client === "claude"
                ? `Bearer \${${endpoint.tokenVariable}}`
                : `Bearer \${env:${endpoint.tokenVariable}}`,
          },
        };
  return `${JSON.stringify({ mcpServers: { [serverName]: server } }, null, 2)}\n`;
}

function codexToml(endpoint: McpEndpoint): string {
  const lines = [`[mcp_servers.${serverName}]`];
  if (endpoint.kind === "stdio") {
    lines.push(`command = ${tomlString(endpoint.command)}`);
    lines.push(`args = [${endpoint.args.map(tomlString).join(", ")}]`);
  } else {
    lines.push(`url = ${tomlString(endpoint.url)}`);
    lines.push(`bearer_token_env_var = ${tomlString(endpoint.tokenVariable)}`);
  }
  return `${lines.join("\n")}\n`;
}

/** A TOML basic string: JSON's escapes are TOML's for everything a path or flag holds. */
function tomlString(text: string): string {
  return JSON.stringify(text);
}

/**
 * Claude Code's own tools that touch the host (shell, files, web, subagents): disallowed in the
 * recipe, so every action goes through cordon's sandbox.
 */
export const claudeHostTools = [
  "Bash",
  "BashOutput",
  "KillShell",
  "Edit",
  "MultiEdit",
  "Write",
  "NotebookEdit",
  "Read",
  "Glob",
  "Grep",
  "LS",
  "WebFetch",
  "WebSearch",
  "Task",
] as const;

/** `claude -p` with only cordon's tools: the task right after `-p` (the list flags take the rest). */
export function claudeRecipe(configFile: string, toolNames: readonly string[]): string {
  const allowed = toolNames.map((name) => `mcp__${serverName}__${name}`).join(",");
  return `claude -p "TASK" --mcp-config ${configFile} --strict-mcp-config --allowedTools ${allowed} --disallowedTools ${claudeHostTools.join(",")}`;
}
