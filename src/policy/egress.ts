import type { ConfigIssue, SandboxConfig } from "../config/index.js";
import type { EgressSpec, MountSpec } from "../sandbox/index.js";
import type { HostEntryKind } from "./mount-plan.js";
import { planned, type Planned } from "./planned.js";

/**
 * Where squid listens in its container, and the port cordon forwards to it on 127.0.0.1 inside
 * the sandbox (the sandbox has no network: docs/network.md, "No route out").
 */
export const egressProxyPort = 3128;
/** Where the host's CA bundle appears in the sandbox (`trustHostCertificates`). */
export const hostCaBundleTarget = "/usr/local/share/cordon/host-ca-certificates.crt";
/** Where the host's CA bundle is looked for, in this order (Debian/Ubuntu, Fedora/RHEL, others). */
export const hostCaBundleCandidates = [
  "/etc/ssl/certs/ca-certificates.crt",
  "/etc/pki/tls/certs/ca-bundle.crt",
  "/etc/ssl/cert.pem",
];

/** One DNS label: letters, digits and inner hyphens. */
const label = "[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?";
const hostPattern = new RegExp(`^(\\*\\.)?(?:${label}\\.)*${label}$`);

/**
 * Why an allowlist entry is refused, or undefined for a good one: a host name, or `*.` and a
 * domain of at least two labels (`*.pythonhosted.org`). No ports, schemes, paths or addresses:
 * the proxy decides by name, and a bare `*` or `*.com` would be the open internet.
 */
export function egressHostProblem(entry: string): string | undefined {
  const host = entry.toLowerCase();
  if (host === "*") return '`*` allows every host; use sandbox.docker.network "bridge" for that';
  if (!hostPattern.test(host) || host.length > 253) {
    return `"${entry}" is not a host name or a "*.domain" pattern (no scheme, port or path)`;
  }
  if (/^[0-9.]+$/.test(host)) return `"${entry}" is an address; allow hosts by name`;
  if (host.startsWith("*.") && host.split(".").length < 3) {
    return `"${entry}" covers a whole top-level domain; name the domain ("*.example.org")`;
  }
  return undefined;
}

/** Whether `host` matches an allowlist entry (`*.x` matches every name under x, not x itself). */
export function egressAllows(allow: readonly string[], host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, "");
  return allow.some((entry) =>
    entry.startsWith("*.") ? name.endsWith(entry.slice(1)) : name === entry,
  );
}

export interface EgressPlanInput {
  config: SandboxConfig["egress"];
  /** Config key of an egress field, for messages. */
  key: (field: keyof SandboxConfig["egress"]) => string;
  /** The run's own additions (`--allow-host`). */
  runAllow?: readonly string[] | undefined;
  /**
   * This phase's allowlist, replacing the config's and the run's (`--setup-allow-host`): a setup
   * phase reaches its package registry, the agent phase after it only what the run allows.
   */
  phaseAllow?: readonly string[] | undefined;
  /**
   * The run's agent reaches the model only through cordon's model gateway (docs/runtimes.md),
   * over a forwarded port like the proxy's, so it gets the proxy's setup even with nothing allowed.
   */
  gateway?: boolean | undefined;
  /** `sandbox.docker.network` as configured, and its key. */
  network: string;
  networkKey: string;
  containerName: string;
  /** What is at a host path (lstat), for the CA bundle. */
  entryKind: (p: string) => HostEntryKind | undefined;
}

export interface EgressPlan {
  egress?: EgressSpec | undefined;
  /** The host's CA bundle, read-only (`trustHostCertificates`). */
  caMount?: MountSpec | undefined;
  /** Proxy and certificate variables for the sandbox's environment. */
  env: Record<string, string>;
}

/**
 * `sandbox.egress` resolved (docs/network.md): the allowlist checked and normalised, the internal
 * network and proxy named after the container, and the environment that points every common
 * client at the proxy (and, with `trustHostCertificates`, at the host's CA bundle).
 */
export function planEgress(input: EgressPlanInput): Planned<EgressPlan> {
  const problems: ConfigIssue[] = [];
  const explanation: string[] = [];
  const phase = input.phaseAllow !== undefined;
  const entries = phase
    ? [...(input.phaseAllow ?? [])]
    : [...input.config.allow, ...(input.runAllow ?? [])];
  const source = phase
    ? "--setup-allow-host"
    : [
        ...(input.config.allow.length ? [input.key("allow")] : []),
        ...(input.runAllow?.length ? ["--allow-host"] : []),
      ].join(", ") || input.key("allow");
  const allow: string[] = [];
  for (const entry of entries) {
    const problem = egressHostProblem(entry);
    if (problem)
      problems.push({ path: phase ? "--setup-allow-host" : input.key("allow"), message: problem });
    else if (!allow.includes(entry.toLowerCase())) allow.push(entry.toLowerCase());
  }
  allow.sort();

  const env: Record<string, string> = {};
  let egress: EgressSpec | undefined;
  if (allow.length > 0 || input.gateway) {
    if (input.network.toLowerCase() !== "none") {
      const needs = allow.length > 0 ? source : "the model gateway (runtime claude-code)";
      problems.push({
        path: input.networkKey,
        message: `is "${input.network}", but ${needs} needs "none": the egress proxy, through a port cordon forwards, is the sandbox's only way out`,
      });
    }
    const proxyUrl = `http://127.0.0.1:${egressProxyPort}`;
    egress = {
      allow,
      proxyContainer: `${input.containerName}-egress`,
      proxyPort: egressProxyPort,
    };
    // Both spellings: curl and Python read the lower-case ones, npm and Go either.
    for (const name of ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]) {
      env[name] = proxyUrl;
    }
    env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1";
    explanation.push(
      allow.length > 0
        ? `egress: only through the proxy ${egress.proxyContainer}, forwarded to 127.0.0.1:${egressProxyPort} in the sandbox over cordon's executor (the sandbox has no network: no route, no DNS), to ${allow.join(", ")} (${source}); every other host is refused`
        : `egress: none but cordon's model gateway, forwarded to a loopback port over cordon's executor (the sandbox has no network: no route, no DNS; the proxy ${egress.proxyContainer} refuses every host: ${input.key("allow")} is empty)`,
    );
  } else {
    explanation.push(
      input.network.toLowerCase() === "none"
        ? `egress: none (${input.key("allow")} is empty; --allow-host adds hosts)`
        : `egress: whatever network "${input.network}" reaches (${input.networkKey}); no allowlist`,
    );
  }

  let caMount: MountSpec | undefined;
  if (input.config.trustHostCertificates) {
    const source = hostCaBundleCandidates.find((p) => {
      const kind = input.entryKind(p);
      return kind === "file" || kind === "symlink";
    });
    if (!source) {
      problems.push({
        path: input.key("trustHostCertificates"),
        message: `no CA bundle on this host (looked for ${hostCaBundleCandidates.join(", ")})`,
      });
    } else {
      caMount = { source, target: hostCaBundleTarget, readOnly: true, role: "ca-certificates" };
      for (const name of [
        "SSL_CERT_FILE",
        "NODE_EXTRA_CA_CERTS",
        "PIP_CERT",
        "REQUESTS_CA_BUNDLE",
      ]) {
        env[name] = hostCaBundleTarget;
      }
      explanation.push(
        `certificates: the host's CA bundle ${source} is copied to the engine (a support volume) and mounted read-only at ${hostCaBundleTarget}, and SSL_CERT_FILE, NODE_EXTRA_CA_CERTS, PIP_CERT, REQUESTS_CA_BUNDLE point at it (${input.key("trustHostCertificates")})`,
      );
    }
  }
  return planned({ egress, caMount, env }, { issues: problems, notes: explanation });
}
