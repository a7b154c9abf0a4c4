import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { hostname, networkInterfaces } from "node:os";

import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";

import type { Logger } from "../common/index.js";
import { allowedHostsFor, checkRequest, type ListenAddress } from "./http-guard.js";
import { createMcpServer } from "./mcp-server.js";
import type { McpSession } from "./mcp-session.js";

export interface ServeHttpOptions {
  listen: ListenAddress;
  /** The bearer token every request must carry. */
  token: string;
  /** A session for each client connection (an MCP `initialize`). */
  newSession: () => McpSession;
  version: string;
  logger: Logger;
  /** Stops serving: every connection's session is closed (calls in flight cancelled). */
  signal: AbortSignal;
  /** Called once listening, with the endpoint's URL (the bound port when 0 was asked). */
  onListening?: ((url: string) => void) | undefined;
  /**
   * A connection with no request for this long (none in flight either) is closed as if its client
   * had ended it: its sandbox released, its session's lock let go. 0 or undefined: never.
   */
  idleTimeoutMs?: number | undefined;
  /** Called when a connection is closed for being idle (the CLI says so on stderr). */
  onIdleClose?: ((session: McpSession) => void) | undefined;
}

/** The one path the server answers on. */
export const mcpPath = "/mcp";

interface Connection {
  transport: StreamableHTTPServerTransport;
  session: McpSession;
  idleTimer?: NodeJS.Timeout | undefined;
}

/**
 * Serves MCP over streamable HTTP until `signal` fires. Every request passes `checkRequest`
 * first (Host and Origin against DNS rebinding, then the bearer token), before the SDK reads a
 * byte of its body. Each `initialize` starts a connection with its own MCP session id, server
 * and `McpSession`; the client's DELETE (or the server's end) closes it, releasing its sandbox.
 */
export async function serveHttp(options: ServeHttpOptions): Promise<void> {
  const connections = new Map<string, Connection>();
  let allowedHosts: string[] = [];
  const idleMs = options.idleTimeoutMs ?? 0;

  /**
   * A client that never says goodbye (killed, laptop closed) would hold its sandbox and the
   * session's lock until the server stops; the idle clock lets them go. Every request starts it
   * again, and it does not end a session with a call in flight (a long exec is never cut by it).
   */
  const startIdleClock = (id: string, connection: Connection): void => {
    clearTimeout(connection.idleTimer);
    connection.idleTimer = undefined;
    if (idleMs <= 0) return;
    connection.idleTimer = setTimeout(() => {
      if (connections.get(id) !== connection) return;
      if (connection.session.busy) {
        startIdleClock(id, connection);
        return;
      }
      connections.delete(id);
      options.onIdleClose?.(connection.session);
      // Closing the transport closes its server, whose onclose closes the session.
      void connection.transport.close();
    }, idleMs);
    connection.idleTimer.unref();
  };

  const refuse = (res: ServerResponse, status: number, message: string): void => {
    res
      .writeHead(status, { "content-type": "application/json" })
      .end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const refusal = checkRequest(
      {
        host: req.headers.host,
        origin: req.headers.origin,
        authorization: req.headers.authorization,
      },
      { token: options.token, allowedHosts },
    );
    if (refusal) {
      if (refusal.status === 401) res.setHeader("www-authenticate", 'Bearer realm="cordon"');
      refuse(res, refusal.status, refusal.message);
      return;
    }
    if (new URL(req.url ?? "/", "http://localhost").pathname !== mcpPath) {
      refuse(res, 404, `cordon mcp answers on ${mcpPath}`);
      return;
    }
    const id = req.headers["mcp-session-id"];
    if (typeof id === "string") {
      const connection = connections.get(id);
      if (!connection) {
        refuse(res, 404, "no such MCP session (it ended or was idle too long): initialize again");
        return;
      }
      startIdleClock(id, connection);
      await connection.transport.handleRequest(req, res);
      return;
    }
    // A request without a session id can only be an initialize: the transport refuses others.
    const session = options.newSession();
    const server = createMcpServer({ session, version: options.version });
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sessionId) => {
        const connection: Connection = { transport, session };
        connections.set(sessionId, connection);
        startIdleClock(sessionId, connection);
      },
    });
    server.onclose = () => {
      if (transport.sessionId !== undefined) {
        clearTimeout(connections.get(transport.sessionId)?.idleTimer);
        connections.delete(transport.sessionId);
      }
      void session.close(options.signal.aborted ? "aborted" : "completed");
    };
    await server.connect(transport);
    await transport.handleRequest(req, res);
    // Not an initialize after all (the transport answered 400): nothing was started.
    if (transport.sessionId === undefined) await server.close();
  };

  const httpServer = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      options.logger.warn({ err: error }, "an MCP request failed");
      if (!res.headersSent) refuse(res, 500, "internal error");
      else res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    httpServer.once("error", reject);
    httpServer.listen(options.listen.port, options.listen.host, () => {
      httpServer.off("error", reject);
      resolve();
    });
  });
  const { port } = httpServer.address() as AddressInfo;
  allowedHosts = allowedHostsFor(options.listen, port, wildcardNames(options.listen.host));
  const shownHost = options.listen.host.includes(":")
    ? `[${options.listen.host}]`
    : options.listen.host;
  options.onListening?.(`http://${shownHost}:${port}${mcpPath}`);

  await new Promise<void>((resolve) => {
    if (options.signal.aborted) resolve();
    else options.signal.addEventListener("abort", () => resolve(), { once: true });
  });
  const open = [...connections.values()];
  connections.clear();
  for (const connection of open) clearTimeout(connection.idleTimer);
  // Closing a transport closes its server, whose onclose closes the session; wait for those.
  await Promise.all(open.map((connection) => connection.transport.close()));
  await Promise.all(open.map((connection) => connection.session.close("aborted")));
  httpServer.closeAllConnections();
  await new Promise<void>((resolve) => httpServer.close(() => resolve()));
}

/** Listening on every interface: the names a client may use are this machine's addresses. */
function wildcardNames(host: string): string[] {
  if (host !== "0.0.0.0" && host !== "::") return [];
  const addresses = Object.values(networkInterfaces()).flatMap((entries) =>
    (entries ?? []).map((entry) => entry.address),
  );
  return ["127.0.0.1", "::1", "localhost", hostname(), ...addresses];
}
