import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";

import { createMcpServer } from "./mcp-server.js";
import type { McpSession } from "./mcp-session.js";

export interface ServeStdioOptions {
  session: McpSession;
  version: string;
  /** Stops serving (an interrupt): calls in flight are cancelled, the session closed. */
  signal: AbortSignal;
  stdin?: NodeJS.ReadableStream | undefined;
  stdout?: NodeJS.WritableStream | undefined;
}

/**
 * Serves one client over stdin/stdout (the client started this process) until it closes stdin,
 * or `signal` fires; then the session is closed: calls in flight are cancelled (their commands
 * killed), the sandbox released and the session's lock let go. stdout carries protocol only.
 */
export async function serveStdio(options: ServeStdioOptions): Promise<void> {
  const stdin = options.stdin ?? process.stdin;
  const stdout = options.stdout ?? process.stdout;
  const server = createMcpServer({ session: options.session, version: options.version });
  const transport = new StdioServerTransport(
    stdin as typeof process.stdin,
    stdout as typeof process.stdout,
  );
  const closed = new Promise<void>((resolve) => {
    server.onclose = resolve;
  });
  // The SDK's transport does not end when its input does: a client that went away closes stdin.
  const end = (): void => {
    void server.close();
  };
  stdin.once("end", end);
  stdin.once("close", end);
  // A client that closed its end of stdout cannot hear us: stop, rather than die of EPIPE.
  stdout.on("error", end);
  options.signal.addEventListener("abort", end, { once: true });
  try {
    await server.connect(transport);
    await closed;
  } finally {
    stdin.off("end", end);
    stdin.off("close", end);
    stdout.off("error", end);
    options.signal.removeEventListener("abort", end);
    await options.session.close(options.signal.aborted ? "aborted" : "completed");
  }
}
