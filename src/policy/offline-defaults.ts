/**
 * Package managers' own offline switches, set in a sandbox that has no network: with them an
 * install fails in about a second ("ENOTCACHED", "No matching distribution") instead of retrying
 * DNS for minutes per command (npm's three retry cycles cost 14 minutes on one fix-tests run).
 * A sandbox with a network (the egress allowlist, `network: "bridge"`) gets none of them.
 */
export const offlineEnvironment: Readonly<Record<string, string>> = {
  // npm, npx and pnpm (which reads npm's settings): the cache only.
  NPM_CONFIG_OFFLINE: "true",
  // Yarn 2+.
  YARN_ENABLE_OFFLINE_MODE: "1",
  // pip: no package index (local wheels and --find-links still work).
  PIP_NO_INDEX: "1",
  // uv.
  UV_OFFLINE: "1",
  // Go modules: no proxy and no direct fetch.
  GOPROXY: "off",
  // Cargo.
  CARGO_NET_OFFLINE: "true",
};

/**
 * The sandbox environment: with no way out (network "none" and no egress proxy), the offline
 * defaults under the declared variables (a variable the config sets wins); otherwise the
 * declared variables alone. The one place that decides whether a sandbox is told it is offline.
 */
export function withOfflineDefaults(
  offline: boolean,
  declared: Readonly<Record<string, string>>,
): Record<string, string> {
  return offline ? { ...offlineEnvironment, ...declared } : { ...declared };
}
