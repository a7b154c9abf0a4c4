import { z } from "zod";

import {
  defineTool,
  errorResult,
  textResult,
  type ToolContext,
  type ToolDefinition,
  type ToolResult,
} from "../tool-definition.js";
import type { ChildRunResult, SessionToolHost } from "./session-tool-host.js";

/**
 * The session tools: start a subagent and get its answer, message a session, list sessions, read
 * one's history. They run in cordon's process, not in the sandbox; what they may touch is the
 * policy's decision, asked through the run's `SessionToolHost`.
 */

/** The most characters of a child's answer or a history the model gets back. */
const maxResultChars = 30_000;

const sessionKeyField = z
  .string()
  .min(1)
  .max(200)
  .describe("A session key from sessions_list (agent:<id>:<name>), or a name of your own agent");
const timeoutField = z
  .number()
  .int()
  .min(1)
  .max(86_400)
  .optional()
  .describe("Stop the child run after this many seconds (default: no limit of its own)");

function hostOf(context: ToolContext): SessionToolHost | undefined {
  return context.sessions;
}

const noHost = errorResult(
  "Session tools work only inside an agent run started by cordon (cordon run, or a runner's run()); nothing was done.",
);

function cut(text: string): string {
  if (text.length <= maxResultChars) return text;
  return `${text.slice(0, maxResultChars)}\n[… ${text.length - maxResultChars} more characters cut]`;
}

/** The child's answer for the parent: ok as the result, else an error result saying why. */
function childResult(kind: "Subagent" | "Session", result: ChildRunResult): ToolResult {
  const who = `${kind} ${result.sessionKey} (agent ${result.agentId}, run ${result.runId})`;
  const deleted = result.deleted ? " Its session was deleted (cleanup: delete)." : "";
  if (result.outcome === "ok") {
    const answer = result.finalText || "(it finished without a text answer)";
    return textResult(`${who} finished after ${result.turns} turns.${deleted}\n\n${cut(answer)}`);
  }
  const lines = [
    `${who} ended with outcome ${result.outcome} (${result.status})${result.message ? `: ${result.message}` : "."}${deleted}`,
  ];
  if (result.fix) lines.push(`Fix: ${result.fix}`);
  if (result.finalText) lines.push("", "Its last text:", cut(result.finalText));
  return errorResult(lines.join("\n"));
}

export const sessionsSpawnTool: ToolDefinition = defineTool({
  name: "sessions_spawn",
  description:
    "Start a subagent: a new session of an agent you are allowed to spawn, given one task, run to its end. " +
    "It works on its own (in its own sandbox, with its own tools) and does not see this conversation, so the task must say everything it needs. " +
    "Returns the subagent's final answer. Use it for a self-contained piece of work; it costs a whole agent run.",
  inputSchema: z.strictObject({
    task: z.string().min(1).max(100_000).describe("The whole task for the subagent"),
    agentId: z
      .string()
      .min(1)
      .max(100)
      .optional()
      .describe("Which agent runs it (default: your own agent)"),
    model: z.string().min(1).max(200).optional().describe("Model for the subagent"),
    label: z.string().min(1).max(80).optional().describe("A short name for lists and logs"),
    cleanup: z
      .enum(["keep", "delete"])
      .default("keep")
      .describe("keep (default): its session stays for sessions_history; delete: removed after"),
    timeoutSec: timeoutField,
  }),
  async execute(input, context) {
    const host = hostOf(context);
    if (!host) return noHost;
    const result = await host.spawn(input, {
      signal: context.signal,
      toolCallId: context.toolCallId,
    });
    return childResult("Subagent", result);
  },
});

export const sessionsSendTool: ToolDefinition = defineTool({
  name: "sessions_send",
  description:
    "Send a message to another session (e.g. a subagent you spawned, to ask a follow-up) and wait for its answer. " +
    "The session's agent runs one more round with the message; returns its final answer.",
  inputSchema: z.strictObject({
    sessionKey: sessionKeyField,
    message: z.string().min(1).max(100_000).describe("The message"),
    timeoutSec: timeoutField,
  }),
  async execute(input, context) {
    const host = hostOf(context);
    if (!host) return noHost;
    const result = await host.send(input, {
      signal: context.signal,
      toolCallId: context.toolCallId,
    });
    return childResult("Session", result);
  },
});

export const sessionsListTool: ToolDefinition = defineTool({
  name: "sessions_list",
  description:
    "List the sessions you may see (a sandboxed session: only the subagents it spawned), newest first, with who spawned them and how their last run ended.",
  inputSchema: z.strictObject({
    limit: z.number().int().min(1).max(200).default(50).describe("Most sessions listed"),
  }),
  async execute(input, context) {
    const host = hostOf(context);
    if (!host) return noHost;
    const sessions = await host.list(input, {
      signal: context.signal,
      toolCallId: context.toolCallId,
    });
    if (sessions.length === 0) return textResult("No sessions visible to this session.");
    const lines = sessions.map((s) => {
      const facts = [
        s.agentId ? `agent ${s.agentId}` : undefined,
        s.label ? `label ${JSON.stringify(s.label)}` : undefined,
        s.spawnedBy ? `spawned by ${s.spawnedBy}` : undefined,
        s.status ? `last run ${s.status}` : undefined,
        `updated ${s.updatedAt}`,
      ].filter((fact) => fact !== undefined);
      return `${s.sessionKey} — ${facts.join(", ")}`;
    });
    return textResult(lines.join("\n"));
  },
});

export const sessionsHistoryTool: ToolDefinition = defineTool({
  name: "sessions_history",
  description:
    "Read the newest messages of a session you may see (e.g. what a subagent did), oldest first.",
  inputSchema: z.strictObject({
    sessionKey: sessionKeyField,
    limit: z.number().int().min(1).max(200).default(20).describe("Most messages returned"),
    includeTools: z
      .boolean()
      .default(false)
      .describe("Include tool calls and their results (default: text only)"),
  }),
  async execute(input, context) {
    const host = hostOf(context);
    if (!host) return noHost;
    const history = await host.history(input, {
      signal: context.signal,
      toolCallId: context.toolCallId,
    });
    if (history.entries.length === 0) {
      return textResult(`Session ${history.sessionKey} has no messages yet.`);
    }
    const shown = history.entries.length;
    const head = `Session ${history.sessionKey}: ${shown === history.total ? `${shown}` : `the newest ${shown} of ${history.total}`} entries.`;
    const body = history.entries.map((e) => `[${e.ts}] ${e.role}: ${e.text}`).join("\n\n");
    return textResult(cut(`${head}\n\n${body}`));
  },
});

/** The four session tools, in the order they are offered. */
export const sessionTools: readonly ToolDefinition[] = [
  sessionsSpawnTool,
  sessionsSendTool,
  sessionsListTool,
  sessionsHistoryTool,
];
