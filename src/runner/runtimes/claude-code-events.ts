import type { ExecResult } from "../../sandbox/index.js";
import { exitCodeForStatus, type RunResult, type RunStatus, type RunUsage } from "../loop/index.js";
import {
  CostMeter,
  type AssistantContentBlock,
  type ModelUsage,
  type ToolResultContent,
} from "../model/index.js";
import type { RunnerEvent } from "../orchestrate/index.js";

/** The parts of Claude Code's `--output-format stream-json` lines cordon reads. */
interface StreamLine {
  type?: string;
  subtype?: string;
  message?: {
    id?: string;
    model?: string;
    content?: unknown;
    usage?: ApiUsage;
  };
  // result lines
  is_error?: boolean;
  result?: unknown;
  num_turns?: number;
  usage?: ApiUsage;
  api_error_status?: unknown;
}

interface ApiUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_input_tokens?: number;
  cache_creation_input_tokens?: number;
}

interface ContentBlock {
  type?: string;
  text?: string;
  thinking?: string;
  id?: string;
  name?: string;
  input?: unknown;
  tool_use_id?: string;
  content?: unknown;
  is_error?: boolean;
}

const emptyUsage = (): RunUsage => ({
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
});

/**
 * Claude Code's stream-json, line by line, as cordon's run events: each assistant message is a
 * turn (`model-start`, text, `tool-call`s, `assistant-message`, `usage`), each tool result a
 * `tool-result`, and its closing `result` line the run's outcome. Everything here is data the
 * agent wrote: it is only ever parsed and shown, never followed.
 */
export class ClaudeCodeEvents {
  private turn = 0;
  private message: { id: string; model: string; blocks: AssistantContentBlock[] } | undefined;
  private readonly toolNames = new Map<string, string>();
  private readonly total = emptyUsage();
  private resultLine: StreamLine | undefined;
  private model: string | undefined;
  /** The model id the API answered with, last. */
  private answeredBy: string | undefined;

  constructor(private readonly emit: (event: RunnerEvent) => void) {}

  /** One line of the agent's stdout; anything that is not a JSON object is ignored. */
  line(text: string): void {
    if (!text.trimStart().startsWith("{")) return;
    let line: StreamLine;
    try {
      line = JSON.parse(text) as StreamLine;
    } catch {
      return;
    }
    switch (line.type) {
      case "system":
        if (line.subtype === "init" && typeof (line as { model?: unknown }).model === "string") {
          this.model = (line as { model: string }).model;
        }
        break;
      case "assistant":
        this.assistant(line);
        break;
      case "user":
        this.finishMessage();
        this.toolResults(line);
        break;
      case "result":
        this.finishMessage();
        this.resultLine = line;
        break;
    }
  }

  /** The run's result, from the `result` line, or from how the process ended without one. */
  runResult(
    ids: { runId: string; sessionKey: string; startedAt: number },
    exec: ExecResult,
  ): RunResult {
    this.finishMessage();
    const result = this.resultLine;
    const finalText = typeof result?.result === "string" ? result.result : "";
    const usage = result?.usage ? { ...toUsage(result.usage) } : { ...this.total };
    const turns = typeof result?.num_turns === "number" ? result.num_turns : this.turn;
    // Priced as cordon's loop prices its calls: by the model that answered, at list prices.
    const cost = new CostMeter();
    if (this.answeredBy) cost.add(this.answeredBy, usage);
    const ended = (status: RunStatus, message?: string, fix?: string): RunResult => ({
      runId: ids.runId,
      sessionKey: ids.sessionKey,
      durationMs: Date.now() - ids.startedAt,
      ...(this.answeredBy ? { model: this.answeredBy } : {}),
      cost: this.answeredBy ? cost.cost : { usd: 0 },
      status,
      exitCode: exitCodeForStatus(status),
      turns,
      usage,
      finalText,
      ...(message !== undefined ? { message } : {}),
      ...(fix !== undefined ? { fix } : {}),
    });
    if (exec.timedOut) {
      return ended(
        "timeout",
        "Claude Code did not finish in the run's time limit",
        "raise --timeout",
      );
    }
    if (!result) {
      const tail = lastLines(exec.stderr || exec.stdout);
      if (exec.exitCode === 127) {
        return ended(
          "sandbox_error",
          "there is no `claude` in the sandbox image",
          "use the Claude Code agent image (`cordon image build --agent claude-code`), or install @anthropic-ai/claude-code in yours",
        );
      }
      return ended(
        "internal_error",
        `Claude Code ended (${exec.signal ?? `exit code ${String(exec.exitCode)}`}) without a result${tail ? `: ${tail}` : ""}`,
        "set CORDON_DEBUG=1 and run again; `cordon logs` shows what it did before",
      );
    }
    if (result.subtype === "success" && !result.is_error) return ended("completed");
    if (result.subtype === "error_max_turns") {
      return ended(
        "limit_turns",
        "Claude Code used up its turns (--max-turns)",
        "raise --max-turns",
      );
    }
    const apiStatus = result.api_error_status;
    const status =
      typeof apiStatus === "number" || typeof apiStatus === "string"
        ? ` (API status ${apiStatus})`
        : "";
    // An API failure comes as subtype "success" with is_error set: "ended with success" read wrong.
    const how =
      result.subtype === undefined || result.subtype === "success" ? "an error" : result.subtype;
    return ended(
      "model_error",
      `Claude Code ended with ${how}${status}${finalText ? `: ${finalText}` : ""}`,
      "look at the model-gateway events (`cordon logs`): a refused or failed API call shows there",
    );
  }

  private assistant(line: StreamLine): void {
    const message = line.message ?? {};
    const id = message.id ?? `turn-${this.turn + 1}`;
    if (this.message?.id !== id) {
      this.finishMessage();
      this.turn += 1;
      const model = message.model ?? this.model ?? "";
      if (message.model) this.answeredBy = message.model;
      this.message = { id, model, blocks: [] };
      this.emit({ type: "model-start", turn: this.turn, model });
      if (message.usage) this.addUsage(toUsage(message.usage));
    }
    for (const block of asBlocks(message.content)) {
      if (block.type === "text" && typeof block.text === "string") {
        this.message.blocks.push({ type: "text", text: block.text });
        this.emit({ type: "text-delta", text: block.text });
      } else if (block.type === "thinking" && typeof block.thinking === "string") {
        this.emit({ type: "thinking-delta", thinking: block.thinking });
      } else if (block.type === "tool_use" && typeof block.id === "string") {
        const name = block.name ?? "";
        const input = isRecord(block.input) ? block.input : {};
        this.toolNames.set(block.id, name);
        this.message.blocks.push({ type: "tool_use", id: block.id, name, input });
        this.emit({ type: "tool-call", toolCallId: block.id, name, input });
      }
    }
  }

  private finishMessage(): void {
    const message = this.message;
    if (!message) return;
    this.message = undefined;
    const stopReason = message.blocks.some((block) => block.type === "tool_use")
      ? "tool_use"
      : "end_turn";
    this.emit({
      type: "assistant-message",
      turn: this.turn,
      model: message.model,
      message: { role: "assistant", content: message.blocks },
      stopReason,
    });
  }

  private toolResults(line: StreamLine): void {
    for (const block of asBlocks(line.message?.content)) {
      if (block.type !== "tool_result" || typeof block.tool_use_id !== "string") continue;
      this.emit({
        type: "tool-result",
        toolCallId: block.tool_use_id,
        name: this.toolNames.get(block.tool_use_id) ?? "",
        isError: block.is_error === true,
        content: resultContent(block.content),
        skipped: false,
      });
    }
  }

  private addUsage(turn: ModelUsage): void {
    this.total.inputTokens += turn.inputTokens;
    this.total.outputTokens += turn.outputTokens;
    this.total.cacheReadTokens = turn.cacheReadTokens;
    this.total.cacheWriteTokens = turn.cacheWriteTokens;
    this.emit({ type: "usage", turn, total: { ...this.total } });
  }
}

function toUsage(usage: ApiUsage): ModelUsage {
  return {
    inputTokens: usage.input_tokens ?? 0,
    outputTokens: usage.output_tokens ?? 0,
    cacheReadTokens: usage.cache_read_input_tokens ?? 0,
    cacheWriteTokens: usage.cache_creation_input_tokens ?? 0,
  };
}

function asBlocks(content: unknown): ContentBlock[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return Array.isArray(content) ? content.filter(isRecord) : [];
}

function resultContent(content: unknown): ToolResultContent[] {
  return asBlocks(content).flatMap((block) =>
    block.type === "text" && typeof block.text === "string"
      ? [{ type: "text" as const, text: block.text }]
      : [],
  );
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function lastLines(text: string): string {
  return text.trim().split("\n").slice(-3).join(" | ").slice(0, 500);
}
