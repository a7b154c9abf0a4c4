import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  type CallToolResult,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";

import { messageOf } from "../common/index.js";
import type { ToolResult } from "../tools/index.js";
import type { McpSession } from "./mcp-session.js";

/** Tools of cordon's own that only read: the plan, and the changes so far. */
const explainTool: Tool = {
  name: "explain",
  description:
    "Show the plan this session's tools run under: whether and how it is sandboxed (container, mounts, network, egress allowlist), each tool's allow/deny decision, and the config key behind every decision. Read-only.",
  inputSchema: { type: "object", properties: {} },
  annotations: { readOnlyHint: true, title: "cordon plan" },
};

const diffTool: Tool = {
  name: "diff",
  description:
    "Show the changes made so far to this session's private copy of the workspace, as a git patch with its sha256: what the person will review with `cordon diff` and apply with `cordon apply`. Read-only; nothing is applied.",
  inputSchema: { type: "object", properties: {} },
  annotations: { readOnlyHint: true, title: "cordon diff" },
};

/** Tools that change nothing: a client may run them without asking (MCP's readOnlyHint). */
const readOnlyTools = new Set(["read", "ls", "find", "grep"]);

const planUri = "cordon://session/plan";
const changesUri = "cordon://session/changes";

/** How often a long call tells the client it still runs (when the client asked for progress). */
const progressEveryMs = 1000;

export interface McpServerOptions {
  session: McpSession;
  /** e.g. "0.1.0". */
  version: string;
}

/**
 * The instructions every client gets at `initialize`: where its tools run, and that applying the
 * work is the person's step, not a tool.
 */
export function serverInstructions(): string {
  return [
    "cordon runs every tool of this server in a policed sandbox: a container with a private copy of the workspace (unless the configuration says otherwise; call `explain` to see the plan).",
    "Use these tools for all file and shell work; your changes stay in the copy and the repository is untouched.",
    "There is no apply tool on purpose: the person reviews your changes with `cordon diff` and applies them with `cordon apply`. Call `diff` to see what they will review, and say when your work is ready for it.",
    "A call the policy refuses returns an error naming the config key that blocks it; do not try to work around it.",
  ].join("\n");
}

/**
 * An MCP server (the SDK's low-level `Server`, so the tools' own JSON Schemas go out as they are)
 * for one client connection, answering from its `McpSession`.
 */
export function createMcpServer(options: McpServerOptions): Server {
  const { session } = options;
  const server = new Server(
    { name: "cordon", version: options.version },
    {
      capabilities: { tools: {}, resources: {} },
      instructions: serverInstructions(),
    },
  );
  server.oninitialized = () => {
    const client = server.getClientVersion();
    if (client) session.setClient({ name: client.name, version: client.version });
  };

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const tools: Tool[] = (await session.tools()).map((spec) => ({
      name: spec.name,
      description: spec.description,
      inputSchema: { type: "object", ...spec.inputSchema },
      ...(readOnlyTools.has(spec.name) ? { annotations: { readOnlyHint: true } } : {}),
    }));
    tools.push(explainTool);
    if (await session.hasChanges()) tools.push(diffTool);
    return { tools };
  });

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const { name } = request.params;
    const input = request.params.arguments ?? {};
    const token = request.params._meta?.progressToken;
    let step = 0;
    let latest = `${name} running`;
    const notify = (message: string): void => {
      if (token === undefined) return;
      step += 1;
      latest = message;
      extra
        .sendNotification({
          method: "notifications/progress",
          params: { progressToken: token, progress: step, message },
        })
        .catch(() => undefined);
    };
    // Liveness for long calls: a client that asked for progress hears from the call every second.
    const started = Date.now();
    const ticker =
      token === undefined
        ? undefined
        : setInterval(() => {
            const seconds = Math.round((Date.now() - started) / 1000);
            notify(`${latest.replace(/ \(\d+ s\)$/, "")} (${seconds} s)`);
          }, progressEveryMs);
    try {
      if (name === explainTool.name) return textContent(await session.explain());
      if (name === diffTool.name) {
        if (!(await session.hasChanges())) {
          return errorContent(
            "This session does not work on a seeded private copy (see `explain`), so there is no diff: its changes are made in place.",
          );
        }
        return textContent((await session.diff(extra.signal)).text);
      }
      const result = await session.call(name, input, { signal: extra.signal, onProgress: notify });
      return toCallToolResult(result);
    } catch (error) {
      return errorContent(`${name} failed: ${messageOf(error)}`);
    } finally {
      if (ticker) clearInterval(ticker);
    }
  });

  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: [
      {
        uri: planUri,
        name: "plan",
        title: "The session's plan",
        description:
          "What `explain` shows: the sandbox, the tools and the config keys behind them.",
        mimeType: "text/plain",
      },
      ...((await session.hasChanges())
        ? [
            {
              uri: changesUri,
              name: "changes",
              title: "The session's changes",
              description: "What `diff` shows: the patch the person will review and apply.",
              mimeType: "text/x-diff",
            },
          ]
        : []),
    ],
  }));

  server.setRequestHandler(ReadResourceRequestSchema, async (request, extra) => {
    const { uri } = request.params;
    if (uri === planUri) {
      return { contents: [{ uri, mimeType: "text/plain", text: await session.explain() }] };
    }
    if (uri === changesUri && (await session.hasChanges())) {
      const { text } = await session.diff(extra.signal);
      return { contents: [{ uri, mimeType: "text/x-diff", text }] };
    }
    throw new Error(`no resource ${uri}: this server has ${planUri} and ${changesUri}`);
  });

  return server;
}

function textContent(text: string): CallToolResult {
  return { content: [{ type: "text", text }] };
}

function errorContent(text: string): CallToolResult {
  return { content: [{ type: "text", text }], isError: true };
}

/** A tool result in MCP's shape: text as text, images as base64 image content. */
export function toCallToolResult(result: ToolResult): CallToolResult {
  return {
    content: result.content.map((block) =>
      block.type === "text"
        ? { type: "text" as const, text: block.text }
        : { type: "image" as const, data: block.dataBase64, mimeType: block.mediaType },
    ),
    ...(result.isError ? { isError: true } : {}),
  };
}
