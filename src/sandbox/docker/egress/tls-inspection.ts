import { existsSync, readFileSync } from "node:fs";
import tls, { type PeerCertificate } from "node:tls";

/**
 * What a sandbox without the host's CA bundle meets on this network: HTTPS to `host` is answered
 * with a certificate chain that only the host's bundle vouches for (a TLS-inspecting proxy or
 * firewall re-signing traffic with its own CA).
 */
export interface TlsInspection {
  host: string;
  /** Who signed the chain's top certificate (its issuer's CN or O), as the network presents it. */
  issuer: string;
  /** The host's CA bundle that verifies it (`sandbox.egress.trustHostCertificates` mounts it). */
  bundle: string;
}

export interface TlsInspectionOptions {
  /** Where the host's CA bundle is looked for, first found wins (`hostCaBundleCandidates`). */
  bundleCandidates: readonly string[];
  /** The roots a sandbox trusts on its own: Node's bundled Mozilla store unless a test says. */
  publicRoots?: readonly string[] | undefined;
  port?: number | undefined;
  /** Per connection; a host that does not answer in time is not diagnosed. */
  timeoutMs?: number | undefined;
}

/** Chain errors a re-signing middlebox causes (not expiry, name mismatch or a revoked leaf). */
const untrustedChain = new Set([
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
]);

interface Handshake {
  authorized: boolean;
  errorCode?: string | undefined;
  issuer: string;
}

/**
 * Whether HTTPS to `host` on this network is re-signed by a CA only this host trusts. Asked after
 * an allowed download failed in a sandbox that does not mount the host's bundle: npm, for one,
 * then ends with "Exit handler never called!" and hides the certificate error behind its log
 * level, so the output alone cannot tell. Two handshakes from cordon's process (no program of the
 * sandbox's, no bytes of the agent's): one against the public roots, one against the host's
 * bundle. Undefined when the chain is publicly trusted, when the host's bundle does not verify it
 * either, or when the host cannot be reached in time.
 */
export async function detectTlsInspection(
  host: string,
  options: TlsInspectionOptions,
): Promise<TlsInspection | undefined> {
  const bundle = options.bundleCandidates.find((candidate) => existsSync(candidate));
  if (!bundle) return undefined;
  const publicRoots = options.publicRoots ?? tls.rootCertificates;
  // Both at once: on a network that drops the connection each waits out its timeout, and a
  // failed setup's message waits for this diagnosis.
  const [asSandbox, asHost] = await Promise.all([
    handshake(host, publicRoots, options),
    handshake(host, [readFileSync(bundle, "utf8")], options),
  ]);
  if (!asSandbox || asSandbox.authorized || !untrustedChain.has(asSandbox.errorCode ?? "")) {
    return undefined;
  }
  if (!asHost?.authorized) return undefined;
  return { host, issuer: asSandbox.issuer, bundle };
}

function handshake(
  host: string,
  roots: readonly string[],
  options: TlsInspectionOptions,
): Promise<Handshake | undefined> {
  return new Promise((resolve) => {
    const socket = tls.connect({
      host,
      port: options.port ?? 443,
      servername: host,
      ca: [...roots],
      // Only looked at, never used: the handshake's verdict is the answer, no byte is sent.
      rejectUnauthorized: false,
    });
    const done = (result: Handshake | undefined): void => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(options.timeoutMs ?? 5_000, () => done(undefined));
    socket.once("error", () => done(undefined));
    socket.once("secureConnect", () => {
      const error = socket.authorizationError as (Error & { code?: string }) | string | null;
      done({
        authorized: socket.authorized,
        errorCode: typeof error === "string" ? error : (error?.code ?? error?.message),
        issuer: topIssuer(socket.getPeerCertificate(true)),
      });
    });
  });
}

/** The issuer of the last certificate the server sent: the CA it claims to chain up to. */
function topIssuer(leaf: PeerCertificate & { issuerCertificate?: PeerCertificate }): string {
  let top: PeerCertificate & { issuerCertificate?: PeerCertificate } = leaf;
  const seen = new Set<PeerCertificate>();
  while (top.issuerCertificate && top.issuerCertificate !== top && !seen.has(top)) {
    seen.add(top);
    top = top.issuerCertificate;
  }
  const issuer = top.issuer as Partial<Record<string, string | string[]>> | undefined;
  const name = issuer?.["CN"] ?? issuer?.["O"];
  return (Array.isArray(name) ? name[0] : name) ?? "an unnamed CA";
}
