/**
 * A real HTTP server on 127.0.0.1 that speaks the Anthropic Messages API with SSE streaming, so
 * tests can point the real SDK at it (baseURL / ANTHROPIC_BASE_URL). Responses are queued in order;
 * every request is recorded.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type ServerBlock =
  | { type: "text"; text: string }
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "redacted_thinking"; data: string }
  /**
   * `input` is sent as input_json_delta chunks; `rawJson` sends exactly that text instead (e.g. a
   * JSON document cut in half, as when max_tokens hits inside a tool call).
   */
  | { type: "tool_use"; id: string; name: string; input?: unknown; rawJson?: string };

export interface ServerUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_input_tokens?: number;
  cache_creation_input_tokens?: number;
}

export type ScriptedResponse =
  | {
      kind: "message";
      content: ServerBlock[];
      /** Default "end_turn", or "tool_use" when there is a tool_use block. */
      stopReason?: string;
      usage?: ServerUsage;
      model?: string;
      /** Leave out content_block_stop of the last block (output cut off mid-block). */
      omitLastBlockStop?: boolean;
    }
  | {
      kind: "error";
      status: number;
      errorType: string;
      message: string;
      headers?: Record<string, string>;
    }
  | {
      /** Streams `content` (may be empty), then an SSE `error` event instead of finishing. */
      kind: "stream-error";
      content?: ServerBlock[];
      errorType: string;
      message: string;
    }
  | {
      /** Sends message_start and one text delta, then waits until the client goes away. */
      kind: "hang";
    };

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  /** The `x-api-key` the request carried (or the bearer token), for tests of key rotation. */
  apiKey: string | undefined;
  body: unknown;
  /** The request's `thinking` field as sent (undefined: none). */
  thinking?: { type: string; budget_tokens?: number } | undefined;
}

export interface MessagesApiServerOptions {
  /**
   * Per model id, the largest thinking budget the model takes (0: no thinking at all). A request
   * over it is answered with the API's 400 invalid_request_error about thinking, without using a
   * queued response, as the real API does for a model that does not support the budget.
   */
  thinkingLimits?: Readonly<Record<string, number>>;
  /**
   * Answers a request itself, before the queue (e.g. every summary call of a compaction, however
   * many chunks there are); undefined leaves it to the queue.
   */
  respond?: ((body: Record<string, unknown>) => ScriptedResponse | undefined) | undefined;
}

export interface MessagesApiServer {
  /** e.g. http://127.0.0.1:PORT — pass as baseURL. */
  readonly url: string;
  readonly requests: RecordedRequest[];
  /** Queue responses, served one per POST /v1/messages, in order. */
  enqueue(...responses: ScriptedResponse[]): void;
  /**
   * Queue responses for requests made with this API key only; they are served before the shared
   * queue, so e.g. one key can be rate-limited while another is answered.
   */
  enqueueForKey(apiKey: string, ...responses: ScriptedResponse[]): void;
  /** Responses not yet served. */
  readonly pending: number;
  /** Resolves when a `hang` response's client disconnected. */
  disconnected(): Promise<void>;
  close(): Promise<void>;
}

export async function startMessagesApiServer(
  options: MessagesApiServerOptions = {},
): Promise<MessagesApiServer> {
  const queue: ScriptedResponse[] = [];
  const keyQueues = new Map<string, ScriptedResponse[]>();
  const requests: RecordedRequest[] = [];
  let messageCounter = 0;
  let onDisconnect: (() => void) | undefined;
  let disconnectedPromise = new Promise<void>((resolve) => (onDisconnect = resolve));

  const server = createServer((req, res) => {
    void handle(req, res).catch((error: unknown) => {
      res.destroy(error instanceof Error ? error : new Error(String(error)));
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      // keep the raw text
    }
    const apiKey =
      headerValue(req.headers["x-api-key"]) ??
      headerValue(req.headers.authorization)?.replace(/^Bearer /, "");
    const fields =
      typeof body === "object" && body !== null ? (body as Record<string, unknown>) : {};
    const thinking = fields["thinking"] as RecordedRequest["thinking"];
    requests.push({
      method: req.method ?? "",
      path: req.url ?? "",
      headers: req.headers,
      apiKey,
      body,
      thinking,
    });

    if (req.method !== "POST" || !req.url?.startsWith("/v1/messages")) {
      sendError(res, 404, "not_found_error", `no route ${req.method} ${req.url}`);
      return;
    }
    const rejection = thinkingRejection(options, String(fields["model"]), thinking);
    if (rejection) {
      sendError(res, 400, "invalid_request_error", rejection);
      return;
    }
    const response =
      options.respond?.(fields) ??
      (apiKey !== undefined ? keyQueues.get(apiKey)?.shift() : undefined) ??
      queue.shift();
    if (!response) {
      sendError(res, 400, "invalid_request_error", "test server: no scripted response left");
      return;
    }
    const model =
      typeof body === "object" && body !== null && "model" in body
        ? String(body.model)
        : "test-model";
    const id = `msg_test_${++messageCounter}`;

    switch (response.kind) {
      case "error":
        sendError(res, response.status, response.errorType, response.message, response.headers);
        return;
      case "message":
        startSse(res);
        writeMessage(res, id, response.model ?? model, response);
        res.end();
        return;
      case "stream-error":
        startSse(res);
        send(res, "message_start", messageStart(id, model, {}));
        (response.content ?? []).forEach((block, index) => writeBlock(res, index, block, true));
        send(res, "error", {
          type: "error",
          error: { type: response.errorType, message: response.message },
        });
        res.end();
        return;
      case "hang":
        startSse(res);
        send(res, "message_start", messageStart(id, model, {}));
        send(res, "content_block_start", {
          type: "content_block_start",
          index: 0,
          content_block: { type: "text", text: "" },
        });
        send(res, "content_block_delta", {
          type: "content_block_delta",
          index: 0,
          delta: { type: "text_delta", text: "thinking about it" },
        });
        res.on("close", () => {
          onDisconnect?.();
          disconnectedPromise = new Promise<void>((resolve) => (onDisconnect = resolve));
        });
        return;
    }
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    enqueue: (...responses) => queue.push(...responses),
    enqueueForKey: (apiKey, ...responses) => {
      keyQueues.set(apiKey, [...(keyQueues.get(apiKey) ?? []), ...responses]);
    },
    get pending() {
      return queue.length;
    },
    disconnected: () => disconnectedPromise,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The API's complaint about a thinking budget the model does not take, if any. */
function thinkingRejection(
  options: MessagesApiServerOptions,
  model: string,
  thinking: RecordedRequest["thinking"],
): string | undefined {
  const limit = options.thinkingLimits?.[model];
  if (limit === undefined || thinking?.type !== "enabled") return undefined;
  if (limit === 0) return `thinking: extended thinking is not supported by model ${model}`;
  const budget = thinking.budget_tokens ?? 0;
  if (budget <= limit) return undefined;
  return `thinking.budget_tokens: ${budget} is greater than the maximum of ${limit} for model ${model}`;
}

function sendError(
  res: ServerResponse,
  status: number,
  type: string,
  message: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, {
    "content-type": "application/json",
    "request-id": "req_test",
    ...headers,
  });
  res.end(JSON.stringify({ type: "error", error: { type, message } }));
}

function startSse(res: ServerResponse): void {
  res.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "request-id": "req_test",
  });
}

function send(res: ServerResponse, event: string, data: unknown): void {
  res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

function messageStart(id: string, model: string, usage: ServerUsage): unknown {
  return {
    type: "message_start",
    message: {
      id,
      type: "message",
      role: "assistant",
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: usage.input_tokens ?? 10,
        output_tokens: 1,
        cache_read_input_tokens: usage.cache_read_input_tokens ?? 0,
        cache_creation_input_tokens: usage.cache_creation_input_tokens ?? 0,
      },
    },
  };
}

function writeMessage(
  res: ServerResponse,
  id: string,
  model: string,
  response: Extract<ScriptedResponse, { kind: "message" }>,
): void {
  const usage = response.usage ?? {};
  send(res, "message_start", messageStart(id, model, usage));
  send(res, "ping", { type: "ping" });
  response.content.forEach((block, index) => {
    const isLast = index === response.content.length - 1;
    writeBlock(res, index, block, !(isLast && response.omitLastBlockStop));
  });
  const hasToolUse = response.content.some((block) => block.type === "tool_use");
  send(res, "message_delta", {
    type: "message_delta",
    delta: {
      stop_reason: response.stopReason ?? (hasToolUse ? "tool_use" : "end_turn"),
      stop_sequence: null,
    },
    usage: {
      output_tokens: usage.output_tokens ?? 5,
      ...(usage.input_tokens !== undefined ? { input_tokens: usage.input_tokens } : {}),
    },
  });
  send(res, "message_stop", { type: "message_stop" });
}

/** Splits text into small pieces so clients must really concatenate deltas. */
function pieces(text: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

function writeBlock(res: ServerResponse, index: number, block: ServerBlock, stop: boolean): void {
  const delta = (payload: unknown): void =>
    send(res, "content_block_delta", { type: "content_block_delta", index, delta: payload });
  switch (block.type) {
    case "text":
      send(res, "content_block_start", {
        type: "content_block_start",
        index,
        content_block: { type: "text", text: "" },
      });
      for (const part of pieces(block.text, 5)) delta({ type: "text_delta", text: part });
      break;
    case "thinking":
      send(res, "content_block_start", {
        type: "content_block_start",
        index,
        content_block: { type: "thinking", thinking: "", signature: "" },
      });
      for (const part of pieces(block.thinking, 7)) {
        delta({ type: "thinking_delta", thinking: part });
      }
      delta({ type: "signature_delta", signature: block.signature });
      break;
    case "redacted_thinking":
      send(res, "content_block_start", {
        type: "content_block_start",
        index,
        content_block: { type: "redacted_thinking", data: block.data },
      });
      break;
    case "tool_use": {
      send(res, "content_block_start", {
        type: "content_block_start",
        index,
        content_block: { type: "tool_use", id: block.id, name: block.name, input: {} },
      });
      const json = block.rawJson ?? JSON.stringify(block.input ?? {});
      for (const part of pieces(json, 7)) delta({ type: "input_json_delta", partial_json: part });
      break;
    }
  }
  if (stop) send(res, "content_block_stop", { type: "content_block_stop", index });
}
