import { lastShownLines } from "../../runner/loop/index.js";
import { formatCost, type RunCost } from "../../runner/model/index.js";
import { printable } from "../printable.js";
import type { LiveLine } from "./live-line.js";

/**
 * Renders run events for `cordon run` and friends: `text` prints the final answer alone on stdout
 * (as `codex exec` and `claude -p` do) and streams narration, tool lines and progress to stderr
 * (none of it with `quiet`); `json` prints one result object at the end; `stream-json` prints every event
 * as a JSONL envelope `{v, seq, ts, runId, type, ...}` and always ends with one `run-end`.
 */

export type OutputFormat = "text" | "json" | "stream-json";
export const outputFormats: readonly OutputFormat[] = ["text", "json", "stream-json"];

/** Version of the stream-json envelope; bumped on an incompatible change. */
export const streamJsonVersion = 1;

/** Any event with a `type`; run events and the orchestrator's own (sandbox, policy). */
export interface RenderableEvent {
  type: string;
  [key: string]: unknown;
}

export interface RunRendererOptions {
  format: OutputFormat;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Text mode: nothing on stderr but a failed run's error (`--quiet`). */
  quiet?: boolean | undefined;
  /**
   * Text mode: stderr reaches where stdout goes, so the final answer, streamed there as
   * narration, is not printed a second time (unless `quiet` kept the narration back).
   */
  narrationShowsAnswer?: boolean | undefined;
  /**
   * Text mode: where a running tool's last output line (`tool-output`) is shown; without it,
   * not at all. Everything else the renderer writes takes the line away first.
   */
  live?: LiveLine | undefined;
  /** Clock for envelopes; tests pass a fixed one. */
  now?: () => Date;
}

export interface RunRenderer {
  /** Any event with a `type` (typed run events are accepted as they are). */
  onEvent(event: { readonly type: string }): void;
  /** Whether a `run-end` was rendered (the CLI synthesises one for failures before the loop). */
  readonly ended: boolean;
}

/**
 * The result's fields under the names `claude -p --output-format json` uses, beside cordon's own,
 * so scripts written for it (`jq .result`, `.is_error`, `.session_id`) work unchanged. The session
 * id is cordon's session key: `--session` takes it back.
 */
function claudePrintFields(result: Record<string, unknown>): Record<string, unknown> {
  const cost = result["cost"] as { usd?: unknown } | undefined;
  return {
    result: result["finalText"],
    session_id: result["sessionKey"],
    is_error: result["status"] !== "completed",
    num_turns: result["turns"],
    duration_ms: result["durationMs"],
    total_cost_usd: cost?.usd ?? null,
  };
}

const previewLength = 160;

function preview(value: unknown): string {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  // Tool input and output come from the agent and the container: never obeyed as terminal codes.
  const oneLine = printable(text.replace(/\s+/g, " ").trim());
  return oneLine.length > previewLength ? `${oneLine.slice(0, previewLength - 1)}…` : oneLine;
}

function describeToolCall(name: string, input: unknown): string {
  if (typeof input === "object" && input !== null) {
    const fields = input as Record<string, unknown>;
    const main = fields["command"] ?? fields["path"] ?? fields["pattern"] ?? fields["action"];
    if (typeof main === "string") return `${name} ${preview(main)}`;
  }
  return `${name} ${preview(input)}`;
}

function firstText(content: unknown): string {
  if (!Array.isArray(content)) return "";
  for (const block of content as { type?: string; text?: string }[]) {
    if (block.type === "text" && block.text) return block.text;
  }
  return "";
}

const execStatusLine = /^\[(exit code (-?\d+)|timed out|killed by [^,\]]+)[^\]]*\]$/gm;

/**
 * An exec result read for a person: the outcome line the tool ends it with (`[exit code 1,
 * 0.3s]`, `[timed out …]`, `[killed by …]`) shortened to "exit 1", "timed out", "killed by signal
 * SIGSEGV", and the last `count` lines of the output before it that show something (a test
 * run's summary and a failure's cause are at the end). The last such line is the tool's own: a
 * command may print one too, earlier.
 */
function execOutcome(text: string, count: number): { mark: string; tail: string[] } | undefined {
  const status = [...text.matchAll(execStatusLine)].at(-1);
  if (!status) return undefined;
  const mark = status[2] !== undefined ? `exit ${status[2]}` : (status[1] ?? "");
  const output = text.slice(0, status.index);
  const tail = output.trim() === "(no output)" ? [] : lastShownLines(output, count);
  return { mark, tail };
}

/** Lines of a failed command's output shown under its result line. */
const failureTailLines = 3;

/**
 * The last progress line of a run: how it ended, how long it took, what it used and cost, and the
 * model that answered, e.g. `· completed in 42.1s, 6 turns, 48,210 tokens, ~$0.1532, claude-…`.
 */
function endLine(event: RenderableEvent): string {
  const parts = [`· ${String(event["status"])}`];
  const durationMs = event["durationMs"];
  if (typeof durationMs === "number") parts[0] += ` in ${(durationMs / 1000).toFixed(1)}s`;
  const turns = Number(event["turns"] ?? 0);
  parts.push(`${turns} turn${turns === 1 ? "" : "s"}`);
  const usage = (event["usage"] ?? {}) as Record<string, unknown>;
  const tokens = Number(usage["inputTokens"] ?? 0) + Number(usage["outputTokens"] ?? 0);
  parts.push(`${tokens.toLocaleString("en-US")} tokens`);
  const cost = event["cost"] as RunCost | undefined;
  if (cost && turns > 0) parts.push(formatCost(cost));
  if (typeof event["model"] === "string") parts.push(event["model"]);
  return parts.join(", ");
}

/** A line of the run's setup phase (`--setup-cmd`): its start and what its egress proxy decided. */
function setupLine(event: RenderableEvent): string | undefined {
  if (event.type === "setup-start") return `· setup: ${printable(String(event["command"]))}\n`;
  if (event.type === "egress" && event["phase"] === "setup") {
    return `· setup egress ${event["allowed"] ? "allowed" : "REFUSED"}: ${printable(String(event["host"]))}:${String(event["port"])}\n`;
  }
  return undefined;
}

export function createRunRenderer(options: RunRendererOptions): RunRenderer {
  const now = options.now ?? (() => new Date());
  let seq = 0;
  let runId = "";
  let ended = false;
  let textOpen = false;
  /**
   * Each destination's decision is shown once per run (and phase): a package manager opens dozens
   * of connections to one registry. The events themselves (stream-json, the events log) keep all.
   */
  const egressShown = new Set<string>();
  const shownBefore = (event: RenderableEvent): boolean => {
    const key = JSON.stringify([event["phase"], event["allowed"], event["host"], event["port"]]);
    if (egressShown.has(key)) return true;
    egressShown.add(key);
    return false;
  };

  // Narration, tool lines and progress: stderr, so stdout carries only the final answer.
  const live = options.quiet ? undefined : options.live;
  const progress = options.quiet
    ? () => undefined
    : (text: string): void => {
        live?.clear();
        options.stderr(text);
      };
  const endText = (): void => {
    if (textOpen) progress("\n");
    textOpen = false;
  };

  /**
   * A child run's event (sessions_spawn, sessions_send), one indented line each: where it runs,
   * its tool calls and results, and how it ended. Its text is not narrated; the parent gets the
   * child's answer as a tool result and says what it makes of it.
   */
  const nested = (wrapper: RenderableEvent): void => {
    const event = (wrapper["event"] ?? {}) as RenderableEvent;
    const label = typeof wrapper["label"] === "string" ? ` ${preview(wrapper["label"])}` : "";
    const who = `  ↳ ${printable(String(wrapper["sessionKey"]))}${label}`;
    switch (event.type) {
      case "plan":
        progress(
          `${who}: ${event["sandboxed"] ? "sandboxed" : "NOT sandboxed (host)"}: ${String(event["reason"])}\n`,
        );
        break;
      case "sandbox-ready":
        progress(`${who}: sandbox ${String(event["container"])} (${String(event["detail"])})\n`);
        break;
      case "tool-call":
        progress(`${who} → ${describeToolCall(String(event["name"]), event["input"])}\n`);
        break;
      case "tool-result": {
        const content = firstText(event["content"]);
        const exec = event["name"] === "exec" && !event["skipped"];
        const outcome = exec ? execOutcome(content, 1) : undefined;
        const mark = event["skipped"] ? "skipped" : event["isError"] ? "error" : "ok";
        const summary = preview(outcome ? (outcome.tail[0] ?? "") : (content.split("\n")[0] ?? ""));
        progress(`${who}   ${outcome?.mark ?? mark}${summary ? `: ${summary}` : ""}\n`);
        break;
      }
      case "subagent":
        nested(event);
        break;
      case "run-end":
        progress(`${who}${endLine(event).slice(1)}\n`);
        if (event["status"] !== "completed" && typeof event["message"] === "string") {
          progress(`${who}: ${preview(event["message"])}\n`);
        }
        break;
    }
  };

  const text = (event: RenderableEvent): void => {
    switch (event.type) {
      case "text-delta":
        progress(String(event["text"]));
        textOpen = true;
        break;
      case "assistant-message":
        endText();
        break;
      case "plan": {
        const where = event["sandboxed"] ? "sandboxed" : "NOT sandboxed (host)";
        progress(`· ${where}: ${String(event["reason"])}\n`);
        const warnings = Array.isArray(event["warnings"]) ? event["warnings"] : [];
        for (const warning of warnings) progress(`  warning: ${String(warning)}\n`);
        break;
      }
      case "session-wait": {
        const holder = (event["holder"] ?? {}) as Record<string, unknown>;
        progress(
          `· session ${String(event["sessionKey"])} is in use by pid ${String(holder["pid"])} on ${String(holder["host"])} since ${String(holder["since"])}; waiting for it to finish (--no-wait: fail instead)\n`,
        );
        break;
      }
      case "sandbox-progress":
        progress(`· ${printable(String(event["message"]))}\n`);
        break;
      case "sandbox-ready":
        progress(`· sandbox ${String(event["container"])} (${String(event["detail"])})\n`);
        // Warnings may name workspace files (a FIFO, a link): shown, never obeyed.
        for (const warning of Array.isArray(event["warnings"]) ? event["warnings"] : []) {
          progress(`  warning: ${printable(String(warning))}\n`);
        }
        break;
      case "checkpoint":
        // Quiet unless it failed: then `rollback --turn` has no state from before that turn.
        if (typeof event["error"] === "string") {
          progress(
            `  warning: no checkpoint before turn ${String(event["turn"])}: ${printable(event["error"])}\n`,
          );
        }
        break;
      case "egress":
        if (shownBefore(event)) break;
        progress(
          `· egress ${event["allowed"] ? "allowed" : "REFUSED"}: ${printable(String(event["host"]))}:${String(event["port"])}\n`,
        );
        break;
      case "model-gateway": {
        const field = (name: string): string => {
          const value = event[name];
          return typeof value === "string" || typeof value === "number" ? String(value) : "";
        };
        const tokens = field("outputTokens")
          ? `, ${field("inputTokens") || "?"} in / ${field("outputTokens")} out`
          : "";
        const outcome = field("refused")
          ? `REFUSED ${field("status")}: ${field("refused")}`
          : field("failed")
            ? `FAILED ${field("status")}: ${printable(field("failed"))}`
            : `${field("status")}${tokens}`;
        const model = field("model") ? ` (${field("model")})` : "";
        progress(`· model gateway ${field("method")} ${field("path")}${model}: ${outcome}\n`);
        break;
      }
      case "tool-call":
        progress(`→ ${describeToolCall(String(event["name"]), event["input"])}\n`);
        break;
      case "tool-output": {
        const line = typeof event["lastLine"] === "string" ? event["lastLine"] : "";
        // From the container: shown as text, never obeyed (printable).
        if (line) live?.show(printable(line));
        break;
      }
      case "tool-result": {
        const content = firstText(event["content"]);
        // An exec's exit code says more than ok/error (a failing test run is "exit 1"), and the
        // end of its output more than the start: a failure shows a few lines of it.
        const outcome =
          event["name"] === "exec" && !event["skipped"]
            ? execOutcome(content, event["isError"] ? failureTailLines : 1)
            : undefined;
        if (outcome) {
          const [only, ...more] = outcome.tail.map(preview);
          if (more.length === 0) {
            progress(`  ${outcome.mark}${only ? `: ${only}` : ""}\n`);
          } else {
            progress(`  ${outcome.mark}:\n`);
            for (const line of [only, ...more]) progress(`    ${line}\n`);
          }
          break;
        }
        const mark = event["skipped"] ? "skipped" : event["isError"] ? "error" : "ok";
        const summary = preview(content.split("\n")[0] ?? "");
        progress(`  ${mark}${summary ? `: ${summary}` : ""}\n`);
        break;
      }
      case "retry": {
        const attempt = event["attempt"];
        const which =
          typeof attempt === "number" ? ` ${attempt}/${String(event["maxRetries"])}` : "";
        const wait = (Number(event["delayMs"]) / 1000).toFixed(1);
        progress(`· retry${which} in ${wait}s: ${String(event["error"])}\n`);
        break;
      }
      case "fallback":
        progress(`· falling back from ${String(event["from"])} to ${String(event["to"])}\n`);
        break;
      case "thinking-downgrade":
        progress(`· thinking stepped down to ${String(event["to"])}: ${String(event["error"])}\n`);
        break;
      case "tool-timeout":
        progress(
          `· ${String(event["name"])} stopped after its time limit (${Number(event["timeoutMs"]) / 1000}s, tools.callTimeoutSec)\n`,
        );
        break;
      case "compaction":
        progress(
          `· compacted ${String(event["summarizedMessages"])} older messages${Number(event["chunks"]) > 1 ? ` in ${String(event["chunks"])} parts` : ""}\n`,
        );
        break;
      case "session-reset":
        progress(`· session reset: ${String(event["message"] ?? event["reason"])}\n`);
        break;
      case "subagent":
        endText();
        nested(event);
        break;
      // fix-tests --attempts: each attempt's run, one indented line per step, as a child run's.
      case "attempt":
        endText();
        nested({ ...event, label: `attempt ${String(event["attempt"])}` });
        break;
      case "attempt-end": {
        endText();
        const outcome = event["won"]
          ? "won: fixed and verified"
          : String(event["status"]).replaceAll("_", " ");
        progress(
          `· attempt ${String(event["attempt"])} ${outcome}${endLine({ ...event, status: "" }).slice(2)}\n`,
        );
        if (!event["won"] && typeof event["message"] === "string") {
          progress(`  ${preview(event["message"])}\n`);
        }
        break;
      }
      case "run-end": {
        live?.clear();
        endText();
        const answer = typeof event["finalText"] === "string" ? event["finalText"] : "";
        const shown = options.narrationShowsAnswer === true && !options.quiet;
        if (answer && !shown) options.stdout(answer.endsWith("\n") ? answer : `${answer}\n`);
        if (event["status"] === "completed") progress(`${endLine(event)}\n`);
        // Stopped by a signal: the CLI's own line says what was stopped and what is left.
        if (event["status"] === "aborted") break;
        if (event["status"] !== "completed") {
          progress(`${endLine(event)}\n`);
          options.stderr(`cordon: ${String(event["message"] ?? event["status"])}\n`);
          const fix = event["fix"];
          if (typeof fix === "string" && fix) options.stderr(`  fix: ${fix}\n`);
        }
        break;
      }
    }
  };

  return {
    get ended() {
      return ended;
    },
    onEvent(typed) {
      const event = typed as RenderableEvent;
      if (event.type === "run-start" && typeof event["runId"] === "string") runId = event["runId"];
      if (event.type === "run-end") {
        if (ended) return;
        ended = true;
      }
      // The setup phase goes to stderr in every format, --quiet too: what it reached or was
      // refused is what explains a setup that failed; stream-json carries them as events as well.
      const setup = setupLine(event);
      if (setup !== undefined) {
        if (event.type !== "egress" || !shownBefore(event)) {
          options.live?.clear();
          options.stderr(setup);
        }
        if (options.format !== "stream-json") return;
      }
      switch (options.format) {
        case "text":
          text(event);
          break;
        case "json":
          if (event.type === "run-end") {
            const { type: _type, ...result } = event;
            options.stdout(`${JSON.stringify({ ...result, ...claudePrintFields(result) })}\n`);
          }
          break;
        case "stream-json":
          seq += 1;
          options.stdout(
            `${JSON.stringify({ v: streamJsonVersion, seq, ts: now().toISOString(), runId, ...event })}\n`,
          );
          break;
      }
    },
  };
}
