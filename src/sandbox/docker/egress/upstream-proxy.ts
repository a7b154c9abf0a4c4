/** The host's own proxy, which the egress proxy sends everything through (squid's cache_peer). */
export interface UpstreamProxy {
  host: string;
  port: number;
  /** `user:password`, percent-decoded, when the proxy URL carries them. */
  login?: string | undefined;
  /** squid `dstdomain` entries from NO_PROXY: `.example.org` covers the domain and below. */
  noProxy: string[];
}

const hostName = /^[A-Za-z0-9.-]+$|^\[[0-9A-Fa-f:]+\]$/;

/**
 * The upstream proxy from the host's environment (HTTPS_PROXY, then HTTP_PROXY, either case), or
 * undefined when there is none. The host's settings are the user's own, but they are written
 * into a squid.conf: anything that is not a plain host, port or credential is left out.
 */
export function upstreamProxyFromEnv(env: NodeJS.ProcessEnv): UpstreamProxy | undefined {
  const raw = env["HTTPS_PROXY"] || env["https_proxy"] || env["HTTP_PROXY"] || env["http_proxy"];
  if (!raw) return undefined;
  let url: URL;
  try {
    url = new URL(raw.includes("://") ? raw : `http://${raw}`);
  } catch {
    return undefined;
  }
  if (url.protocol !== "http:" || !hostName.test(url.hostname)) return undefined;
  const port = Number(url.port || 80);
  const user = decodeURIComponent(url.username);
  const password = decodeURIComponent(url.password);
  const credential = /^[^\s:]+$/;
  const login =
    user && credential.test(user) && (!password || /^\S+$/.test(password))
      ? password
        ? `${user}:${password}`
        : user
      : undefined;
  const noProxy = (env["NO_PROXY"] || env["no_proxy"] || "")
    .split(",")
    .map((entry) => entry.trim().toLowerCase().replace(/^\*\./, "."))
    .filter((entry) => entry !== "" && /^\.?[a-z0-9.-]+$/.test(entry))
    .map((entry) => (entry.startsWith(".") ? entry : `.${entry}`));
  return { host: url.hostname, port, login, noProxy: [...new Set(noProxy)] };
}
