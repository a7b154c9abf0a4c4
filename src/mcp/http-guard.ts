import { createHash, timingSafeEqual } from "node:crypto";
import { isIP } from "node:net";

import { ConfigError } from "../common/index.js";

/** Where `cordon mcp --http` listens. */
export interface ListenAddress {
  host: string;
  port: number;
}

const loopbackHosts = new Set(["127.0.0.1", "::1", "localhost"]);

/** True for an address only this machine can reach. */
export function isLoopback(host: string): boolean {
  return loopbackHosts.has(host) || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * `--http [HOST:]PORT`: loopback (127.0.0.1) unless a host is named; an IPv6 host is written in
 * brackets (`[::1]:8765`). Port 0 takes a free port.
 */
export function parseListenAddress(text: string): ListenAddress {
  const match = /^(?:(\[[0-9a-fA-F:.]+\]|[^:[\]]+):)?(\d{1,5})$/.exec(text.trim());
  const port = Number(match?.[2]);
  if (!match || !Number.isInteger(port) || port > 65_535) {
    throw new ConfigError(`--http ${JSON.stringify(text)} is not [HOST:]PORT`, {
      fix: "give a port (--http 8765, on 127.0.0.1) or a host and port (--http 127.0.0.1:8765, --http [::1]:8765)",
    });
  }
  const host = match[1]?.replace(/^\[(.*)\]$/, "$1") ?? "127.0.0.1";
  if (host !== "localhost" && isIP(host) === 0) {
    throw new ConfigError(`--http: ${JSON.stringify(host)} is not an IP address`, {
      fix: "listen on an address (127.0.0.1, ::1, or an interface's address), not a name",
    });
  }
  return { host, port };
}

/** A request refused before the MCP transport sees it. */
export interface Refusal {
  status: 401 | 403;
  message: string;
}

export interface RequestGuardOptions {
  /** The bearer token every request must carry. */
  token: string;
  /**
   * The `host:port` values a request's Host header (and an Origin's host) may name: the listening
   * address and, for loopback, the loopback names. Anything else is a DNS-rebinding attempt or a
   * misdirected request.
   */
  allowedHosts: readonly string[];
}

/** The `host:port` names the server answers to when listening on `address` (bound `port`). */
export function allowedHostsFor(
  address: ListenAddress,
  port: number,
  extra: readonly string[] = [],
): string[] {
  const names = new Set<string>();
  const add = (host: string): void => {
    names.add(`${host.includes(":") ? `[${host}]` : host}:${port}`.toLowerCase());
  };
  if (isLoopback(address.host)) for (const host of loopbackHosts) add(host);
  else add(address.host);
  for (const host of extra) add(host);
  return [...names];
}

/**
 * Decides whether a request may reach the MCP transport, from its headers alone: a Host that is
 * not this server's, or an Origin of another site, is refused (403) — that is what stops a web
 * page from reaching a loopback server through DNS rebinding; then a request without the bearer
 * token is refused (401). The token is compared in constant time.
 */
export function checkRequest(
  headers: {
    host?: string | undefined;
    origin?: string | undefined;
    authorization?: string | undefined;
  },
  options: RequestGuardOptions,
): Refusal | undefined {
  const allowed = new Set(options.allowedHosts.map((host) => host.toLowerCase()));
  const host = headers.host?.toLowerCase();
  if (host === undefined || !allowed.has(host)) {
    return {
      status: 403,
      message: `Host ${JSON.stringify(headers.host ?? "")} is not this server's`,
    };
  }
  if (headers.origin !== undefined && headers.origin !== "null") {
    let originHost: string | undefined;
    try {
      const url = new URL(headers.origin);
      originHost = url.protocol === "http:" ? `${url.hostname}:${url.port || "80"}` : undefined;
    } catch {
      originHost = undefined;
    }
    if (originHost === undefined || !allowed.has(originHost.toLowerCase())) {
      return { status: 403, message: `Origin ${JSON.stringify(headers.origin)} is not allowed` };
    }
  } else if (headers.origin === "null") {
    return { status: 403, message: 'Origin "null" is not allowed' };
  }
  const presented = /^Bearer\s+(\S+)\s*$/i.exec(headers.authorization ?? "")?.[1];
  if (presented === undefined || !sameSecret(presented, options.token)) {
    return {
      status: 401,
      message:
        "a bearer token is required: send Authorization: Bearer <the token cordon mcp printed>",
    };
  }
  return undefined;
}

/** Equal secrets, in time independent of where they differ (both hashed to one length first). */
function sameSecret(a: string, b: string): boolean {
  const digest = (text: string): Buffer => createHash("sha256").update(text).digest();
  return timingSafeEqual(digest(a), digest(b));
}
