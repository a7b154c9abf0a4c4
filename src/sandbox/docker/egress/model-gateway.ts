import { randomBytes, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { Readable, type Duplex } from "node:stream";
import type { ReadableStream as WebReadableStream } from "node:stream/web";

import { messageOf } from "../../../common/index.js";

/** The Anthropic API, when the host names no other endpoint (`ANTHROPIC_BASE_URL`). */
export const anthropicApiUrl = "https://api.anthropic.com";

/** One request through the gateway, as a run event reports it (docs/runtimes.md). */
export interface ModelGatewayCall {
  method: string;
  /** The path without its query, e.g. `/v1/messages`. */
  path: string;
  /** The model the request named, when it named one. */
  model?: string | undefined;
  /** The upstream's status; 403/401/502 are the gateway's own answers (see `refused`). */
  status: number;
  /** Why the gateway answered itself instead of forwarding. */
  refused?: string | undefined;
  /** Why a forwarded call got no usable answer (none, or a redirect): the gateway answered 502. */
  failed?: string | undefined;
  /** Token counts, when the response (JSON or SSE stream) showed them. */
  inputTokens?: number | undefined;
  outputTokens?: number | undefined;
}

export interface ModelGatewayOptions {
  /** Where calls go: the host's `ANTHROPIC_BASE_URL`, else the Anthropic API. */
  upstream: string;
  /** The real credential, added to every forwarded call; it never leaves this process otherwise. */
  credential: { apiKey: string } | { authToken: string };
  onCall?: ((call: ModelGatewayCall) => void) | undefined;
}

export interface ModelGateway {
  /**
   * What the sandbox sets as its API key: random per gateway, worthless anywhere else; the
   * gateway refuses a call without it.
   */
  readonly placeholderKey: string;
  /**
   * Serves HTTP on one connection: a channel of the port forwarded into the sandbox for this
   * gateway (the gateway has no listener of its own; nothing but its sandbox can reach it).
   */
  accept(connection: Duplex): void;
  /** Ends every connection it serves. */
  close(): Promise<void>;
}

/** The Messages API paths an agent CLI needs; anything else is refused with 403. */
const forwardedPaths = new Set(["/v1/messages", "/v1/messages/count_tokens"]);
/** Largest request body forwarded (the API's own limit for a Messages request is 32 MB). */
const maxRequestBytes = 32 * 1024 * 1024;
/** Request headers never forwarded: the placeholder credential, and what the hop itself owns. */
const droppedRequestHeaders = new Set([
  "host",
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "transfer-encoding",
  "upgrade",
  "te",
  "trailer",
  "content-length",
  // fetch decompresses; the sandbox gets plain bytes and no content-encoding.
  "accept-encoding",
  "x-api-key",
  "authorization",
]);
const droppedResponseHeaders = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "content-encoding",
  "content-length",
]);

/**
 * Keys at the edge (docs/runtimes.md): an HTTP server in cordon's own process that listens
 * nowhere: it serves the connections handed to it (`accept`), which come from a loopback port
 * forwarded into the sandbox over cordon's executor. It forwards Messages API calls to the real
 * endpoint with the real key added and streams the answers back. The sandbox holds only a
 * per-run placeholder; the key stays in this process. Node's HTTP server parses the requests and
 * the platform's fetch (undici) forwards them; nothing here parses HTTP.
 */
export function createModelGateway(options: ModelGatewayOptions): ModelGateway {
  const placeholderKey = `cordon-gateway-${randomBytes(24).toString("hex")}`;
  const upstream = new URL(options.upstream);
  const sockets = new Set<Duplex>();

  const server = createServer((request, response) => {
    void forward(request, response).catch((error: unknown) => {
      if (!response.headersSent) answer(response, 502, "api_error", messageOf(error));
      else response.destroy();
    });
  });
  server.on("connection", (socket: Duplex) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });

  async function forward(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? "/", "http://gateway.invalid");
    const method = request.method ?? "GET";
    const call: ModelGatewayCall = { method, path: url.pathname, status: 0 };
    const refuse = (status: number, reason: string, type: string): void => {
      request.resume();
      answer(response, status, type, `cordon's model gateway: ${reason}`);
      options.onCall?.({ ...call, status, refused: reason });
    };
    if (!presentsPlaceholder(request, placeholderKey)) {
      refuse(401, "the request does not carry this run's placeholder key", "authentication_error");
      return;
    }
    if (method !== "POST" || !forwardedPaths.has(url.pathname)) {
      refuse(403, `${method} ${url.pathname} is not a Messages API call`, "permission_error");
      return;
    }
    const body = await readBody(request);
    if (!body) {
      refuse(413, `a request over ${maxRequestBytes} bytes`, "request_too_large");
      return;
    }
    call.model = modelOf(body);

    const target = new URL(
      upstream.pathname.replace(/\/$/, "") + url.pathname + url.search,
      upstream,
    );
    const headers = new Headers();
    for (const [name, value] of Object.entries(request.headers)) {
      if (value === undefined || droppedRequestHeaders.has(name)) continue;
      headers.set(name, Array.isArray(value) ? value.join(", ") : value);
    }
    if ("apiKey" in options.credential) headers.set("x-api-key", options.credential.apiKey);
    else headers.set("authorization", `Bearer ${options.credential.authToken}`);

    const abort = new AbortController();
    response.on("close", () => abort.abort());
    let upstreamResponse: Response;
    try {
      // "manual": a redirect would carry the real key to whatever origin the upstream names.
      upstreamResponse = await fetch(target, {
        method,
        headers,
        body,
        signal: abort.signal,
        redirect: "manual",
      });
    } catch (error) {
      // The agent sees only a 502 and retries it for minutes (Claude Code does): the event says
      // where the call went and why it failed. (undici puts the reason, ECONNREFUSED, in cause.)
      const reason = messageOf((error as { cause?: unknown }).cause ?? error);
      options.onCall?.({ ...call, status: 502, failed: `${upstream.origin}: ${reason}` });
      throw error;
    }
    if (isRedirect(upstreamResponse.status)) {
      await upstreamResponse.body?.cancel();
      const reason = redirectReason(upstreamResponse);
      options.onCall?.({ ...call, status: 502, failed: `${upstream.origin}: ${reason}` });
      answer(response, 502, "api_error", `cordon's model gateway: ${upstream.origin} ${reason}`);
      return;
    }
    call.status = upstreamResponse.status;
    const responseHeaders: Record<string, string> = {};
    upstreamResponse.headers.forEach((value, name) => {
      if (!droppedResponseHeaders.has(name)) responseHeaders[name] = value;
    });
    response.writeHead(upstreamResponse.status, responseHeaders);
    const usage = new UsageTap();
    if (upstreamResponse.body) {
      const stream = Readable.fromWeb(upstreamResponse.body as WebReadableStream<Uint8Array>);
      for await (const chunk of stream) {
        usage.push(chunk as Buffer);
        if (!response.write(chunk)) await new Promise((resolve) => response.once("drain", resolve));
      }
    }
    response.end();
    options.onCall?.({ ...call, ...usage.totals() });
  }

  return {
    placeholderKey,
    accept: (connection) => {
      // A connection whose other end went away mid-request is that request's end, not cordon's.
      connection.on("error", () => connection.destroy());
      server.emit("connection", connection);
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
      return Promise.resolve();
    },
  };
}

function isRedirect(status: number): boolean {
  return status >= 300 && status < 400;
}

/** Why a redirect is not followed, naming where it pointed and what to set instead. */
function redirectReason(response: Response): string {
  const location = response.headers.get("location");
  const where = location === null ? "with no Location" : `to ${JSON.stringify(location)}`;
  return `answered ${response.status} ${where}; the gateway follows no redirect (the key would go with it): set ANTHROPIC_BASE_URL to the address that answers`;
}

function presentsPlaceholder(request: IncomingMessage, placeholder: string): boolean {
  const bearer = /^Bearer (.+)$/i.exec(request.headers.authorization ?? "")?.[1];
  const presented = request.headers["x-api-key"] ?? bearer;
  if (typeof presented !== "string") return false;
  const a = Buffer.from(presented);
  const b = Buffer.from(placeholder);
  return a.length === b.length && timingSafeEqual(a, b);
}

async function readBody(request: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > maxRequestBytes) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

function modelOf(body: Buffer): string | undefined {
  try {
    const parsed: unknown = JSON.parse(body.toString("utf8"));
    if (typeof parsed === "object" && parsed !== null && "model" in parsed) {
      return typeof parsed.model === "string" ? parsed.model : undefined;
    }
  } catch {
    // Not JSON: the upstream will say so.
  }
  return undefined;
}

function answer(response: ServerResponse, status: number, type: string, message: string): void {
  response.writeHead(status, { "content-type": "application/json" });
  response.end(JSON.stringify({ type: "error", error: { type, message } }));
}

/**
 * Token counts read from what passes through: a JSON message's `usage`, or an SSE stream's
 * `message_start` (input) and `message_delta` (output, cumulative) events. Only looks, never
 * changes a byte.
 */
class UsageTap {
  private text = "";
  private inputTokens: number | undefined;
  private outputTokens: number | undefined;
  private readonly decoder = new TextDecoder();

  push(chunk: Uint8Array): void {
    // Bounded: usage sits in small events; a long body's middle is of no interest.
    this.text += this.decoder.decode(chunk, { stream: true });
    let newline = this.text.indexOf("\n");
    while (newline >= 0) {
      this.line(this.text.slice(0, newline));
      this.text = this.text.slice(newline + 1);
      newline = this.text.indexOf("\n");
    }
    if (this.text.length > 1024 * 1024) this.text = this.text.slice(-64 * 1024);
  }

  totals(): Pick<ModelGatewayCall, "inputTokens" | "outputTokens"> {
    if (this.text) this.line(this.text);
    return { inputTokens: this.inputTokens, outputTokens: this.outputTokens };
  }

  private line(line: string): void {
    const json = line.startsWith("data:") ? line.slice(5).trim() : line.trim();
    if (!json.startsWith("{")) return;
    let event: {
      type?: string;
      usage?: { input_tokens?: number; output_tokens?: number };
      message?: { usage?: { input_tokens?: number; output_tokens?: number } };
    };
    try {
      event = JSON.parse(json) as typeof event;
    } catch {
      return;
    }
    const usage = event.type === "message_start" ? event.message?.usage : event.usage;
    if (typeof usage?.input_tokens === "number") this.inputTokens = usage.input_tokens;
    if (typeof usage?.output_tokens === "number") this.outputTokens = usage.output_tokens;
  }
}
