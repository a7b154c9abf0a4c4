import { accessLogTag } from "./squid-config.js";

/** One decision of an egress proxy: the `egress` run event. */
export interface EgressDecision {
  host: string;
  port: number;
  allowed: boolean;
  /** GET, CONNECT, … */
  method: string;
  /** The HTTP status the proxy answered (403 when refused). */
  status: number;
}

/**
 * The decision in one line of the proxy's access log (`logformat cordon` in squid-config.ts:
 * `cordon-egress METHOD HOST PORT STATUS SQUID_STATUS`), or undefined for any other line. A
 * request is refused when squid's status says DENIED; an allowed request that failed further on
 * (an upstream error) was still let out.
 */
export function parseEgressLine(line: string): EgressDecision | undefined {
  const words = line.trim().split(/\s+/);
  if (words[0] !== accessLogTag || words.length < 6) return undefined;
  const [, method = "", host = "", port = "", status = "", squidStatus = ""] = words;
  const portNumber = Number(port);
  if (!host || host === "-" || !Number.isInteger(portNumber)) return undefined;
  return {
    host: host.toLowerCase(),
    port: portNumber,
    allowed: !squidStatus.includes("DENIED"),
    method,
    status: Number(status) || 0,
  };
}
