import { access, readFile } from "node:fs/promises";
import { z } from "zod";
import { AbortedError, ConfigError, sleep, throwIfAborted } from "../../common/index.js";
import { fixForKind, ModelApiError, type ModelErrorKind } from "./model-errors.js";
import type {
  AssistantContentBlock,
  Message,
  ModelClient,
  ModelRequest,
  ModelStreamEvent,
  ModelUsage,
  StopReason,
} from "./types.js";

/* The script format is documented in docs/scripted-model.md; keep the two in step. */

const errorKinds = [
  "overloaded",
  "rate_limited",
  "server",
  "network",
  "billing",
  "auth",
  "context_overflow",
  "invalid_request",
  "other",
] as const satisfies readonly ModelErrorKind[];

const stopReasons = [
  "end_turn",
  "tool_use",
  "max_tokens",
  "stop_sequence",
  "pause_turn",
  "refusal",
  "model_context_window_exceeded",
] as const satisfies readonly StopReason[];

const scriptBlockSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("text"), text: z.string() }),
  z.strictObject({
    type: z.literal("thinking"),
    thinking: z.string(),
    signature: z.string().default("scripted-signature"),
  }),
  z.strictObject({ type: z.literal("redacted_thinking"), data: z.string() }),
  z.strictObject({
    type: z.literal("tool_use"),
    id: z.string().min(1).optional(),
    name: z.string().min(1),
    input: z.record(z.string(), z.unknown()).default({}),
  }),
]);

const scriptTurnSchema = z.strictObject({
  /** Assistant content blocks, in order. */
  content: z.array(scriptBlockSchema).default([]),
  /** Default: "tool_use" when the content has a tool_use block, else "end_turn". */
  stopReason: z.enum(stopReasons).optional(),
  usage: z
    .strictObject({
      inputTokens: z.number().int().nonnegative().default(0),
      outputTokens: z.number().int().nonnegative().default(0),
      cacheReadTokens: z.number().int().nonnegative().default(0),
      cacheWriteTokens: z.number().int().nonnegative().default(0),
    })
    .optional(),
  /** Instead of answering, fail this call with a model error of this kind. */
  error: z
    .strictObject({
      kind: z.enum(errorKinds),
      message: z.string().default("scripted model error"),
      retryAfterMs: z.number().nonnegative().optional(),
    })
    .optional(),
  /** Instead of answering, wait until the request is aborted (for abort tests). */
  waitForAbort: z.boolean().default(false),
  /**
   * Before answering, wait until this path exists on the host (relative to the working
   * directory): a gate a test opens when something it watches has happened, so the order of
   * concurrent runs follows from events, not from sleeps.
   */
  waitForFile: z.string().min(1).optional(),
});

/** A scripted model's script: the assistant turns it plays, one per model call. */
export const modelScriptSchema = z.strictObject({
  version: z.literal(1),
  /** The model id reported in results. Default "scripted". */
  model: z.string().default("scripted"),
  turns: z.array(scriptTurnSchema),
});

export type ModelScript = z.infer<typeof modelScriptSchema>;
export type ModelScriptInput = z.input<typeof modelScriptSchema>;
export type ModelScriptTurn = z.infer<typeof scriptTurnSchema>;

/** Validates a script, reporting problems as `path: message`. */
export function parseModelScript(value: unknown, source = "model script"): ModelScript {
  const result = modelScriptSchema.safeParse(value);
  if (result.success) return result.data;
  const issues = result.error.issues
    .map((issue) => `${issue.path.join(".") || "(root)"}: ${issue.message}`)
    .join("; ");
  throw new ConfigError(`The ${source} is invalid: ${issues}`, {
    fix: "`cordon help scripted-model` describes the script format",
  });
}

/** A request the scripted model received, without its signal. */
export type RecordedModelRequest = Omit<ModelRequest, "signal">;

/**
 * A `ModelClient` that replays a script of assistant turns, one per call, and records every
 * request it got. Offline, deterministic: for tests, the demo and CI.
 */
export class ScriptedModelClient implements ModelClient {
  readonly provider = "scripted";
  /** Every request so far, in order (deep copies, so later changes to a session do not leak in). */
  readonly requests: RecordedModelRequest[] = [];
  readonly #script: ModelScript;
  #next = 0;
  #ids = 0;

  constructor(script: ModelScript | ModelScriptInput) {
    this.#script = parseModelScript(script);
  }

  /** Reads and validates a JSON script file. */
  static async fromFile(path: string, signal?: AbortSignal): Promise<ScriptedModelClient> {
    const text = await readFile(path, { encoding: "utf8", signal }).catch((error: unknown) => {
      // A path the user typed: a config error naming it, not an internal one.
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== "ENOENT" && code !== "EISDIR" && code !== "EACCES") throw error;
      const why = { ENOENT: "does not exist", EISDIR: "is a directory", EACCES: "cannot be read" }[
        code
      ];
      throw new ConfigError(`The model script ${path} ${why}.`, {
        fix: "pass the path of a JSON script (`cordon help scripted-model` describes the format)",
        cause: error,
      });
    });
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (error) {
      throw new ConfigError(`The model script ${path} is not valid JSON.`, {
        fix: "`cordon help scripted-model` describes the script format",
        cause: error,
      });
    }
    return new ScriptedModelClient(parseModelScript(json, `model script ${path}`));
  }

  /** Turns not yet played. */
  get remainingTurns(): number {
    return this.#script.turns.length - this.#next;
  }

  async *stream(request: ModelRequest): AsyncGenerator<ModelStreamEvent> {
    const { signal, ...rest } = request;
    // Frozen messages (a session's) cannot change later: kept as they are, not copied each call.
    const copy = <T>(value: T): T => (Object.isFrozen(value) ? value : structuredClone(value));
    const recorded: RecordedModelRequest = {
      ...rest,
      thinking: copy(rest.thinking),
      tools: copy(rest.tools),
      messages: rest.messages.map(copy),
    };
    this.requests.push(recorded);
    throwIfAborted(signal, "the model request");
    const turn = this.#script.turns[this.#next];
    if (!turn) {
      throw new ModelApiError(
        `The model script has no turn left for call ${this.#next + 1} (it has ${this.#script.turns.length}).`,
        { kind: "other", fix: "add more turns to the model script (`cordon help scripted-model`)" },
      );
    }
    this.#next += 1;

    if (turn.waitForAbort) {
      await waitForAbort(signal);
    }
    if (turn.waitForFile !== undefined) {
      await waitForFile(turn.waitForFile, signal);
    }
    if (turn.error) {
      throw new ModelApiError(turn.error.message, {
        kind: turn.error.kind,
        retryAfterMs: turn.error.retryAfterMs,
        fix: fixForKind(turn.error.kind),
      });
    }

    const hasToolUse = turn.content.some((block) => block.type === "tool_use");
    const stopReason: StopReason = turn.stopReason ?? (hasToolUse ? "tool_use" : "end_turn");
    const cutOff = stopReason === "max_tokens" || stopReason === "model_context_window_exceeded";
    const content: AssistantContentBlock[] = [];
    for (const [index, block] of turn.content.entries()) {
      throwIfAborted(signal, "the model request");
      if (block.type === "text") {
        yield { type: "text-delta", text: block.text };
        content.push({ type: "text", text: block.text });
      } else if (block.type === "thinking") {
        yield { type: "thinking-delta", thinking: block.thinking };
        content.push({ ...block });
      } else if (block.type === "redacted_thinking") {
        content.push({ ...block });
      } else {
        const id = block.id ?? `toolu_scripted_${++this.#ids}`;
        yield { type: "tool-use-start", id, name: block.name };
        const isLast = index === turn.content.length - 1;
        content.push({
          type: "tool_use",
          id,
          name: block.name,
          input: structuredClone(block.input),
          // Same rule as the Anthropic client: output cut off inside a tool call never runs.
          ...(cutOff && isLast ? { truncated: true as const } : {}),
        });
      }
    }
    yield {
      type: "done",
      turn: {
        message: { role: "assistant", content },
        stopReason,
        usage: turn.usage ?? estimateUsage(recorded, content),
        model: this.#script.model,
      },
    };
  }
}

function waitForAbort(signal: AbortSignal | undefined): Promise<never> {
  return new Promise((_, reject) => {
    const fail = (): void => reject(new AbortedError("the model request was aborted"));
    if (!signal) {
      reject(new Error("a waitForAbort turn needs a request with an AbortSignal"));
      return;
    }
    if (signal.aborted) fail();
    else signal.addEventListener("abort", fail, { once: true });
  });
}

/** How long a `waitForFile` turn waits before it fails the call: generous, it is a test's gate. */
export const waitForFileLimitMs = 10 * 60_000;

async function waitForFile(file: string, signal: AbortSignal | undefined): Promise<void> {
  const deadline = Date.now() + waitForFileLimitMs;
  for (;;) {
    throwIfAborted(signal, "the model request");
    if (
      await access(file).then(
        () => true,
        () => false,
      )
    )
      return;
    if (Date.now() > deadline) {
      throw new ModelApiError(
        `The model script waited ${waitForFileLimitMs / 60_000} minutes for ${file}, which never appeared.`,
        {
          kind: "other",
          fix: "create the file the script's waitForFile names, or remove the gate",
        },
      );
    }
    await sleep(50, signal);
  }
}

/** The JSON length of each frozen message, measured once. */
const jsonLengths = new WeakMap<Message, number>();

function jsonLength(message: Message): number {
  const known = jsonLengths.get(message);
  if (known !== undefined) return known;
  const length = JSON.stringify(message).length;
  if (Object.isFrozen(message)) jsonLengths.set(message, length);
  return length;
}

/**
 * About four characters a token: deterministic, so token-limit tests can rely on it. The input
 * is the length of the messages as one JSON array (brackets, commas and each message).
 */
function estimateUsage(
  request: RecordedModelRequest,
  content: AssistantContentBlock[],
): ModelUsage {
  const messages = request.messages.reduce(
    (sum, message, index) => sum + jsonLength(message) + (index > 0 ? 1 : 0),
    2,
  );
  const input = request.system.length + messages;
  return {
    inputTokens: Math.ceil(input / 4),
    outputTokens: Math.ceil(JSON.stringify(content).length / 4),
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
  };
}
