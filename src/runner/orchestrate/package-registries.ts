/**
 * The registries the common package managers fetch from, for the fix of a setup that failed with
 * no network: `npm ci` then names `--setup-allow-host registry.npmjs.org` instead of leaving the
 * user to read npm's ENOTCACHED. Taken from the command the user wrote, never from its output
 * (which a hostile repository's scripts could word to suggest any host).
 */
const registries: Record<string, readonly string[]> = {
  npm: ["registry.npmjs.org"],
  npx: ["registry.npmjs.org"],
  pnpm: ["registry.npmjs.org"],
  yarn: ["registry.yarnpkg.com", "registry.npmjs.org"],
  pip: ["pypi.org", "files.pythonhosted.org"],
  pip3: ["pypi.org", "files.pythonhosted.org"],
  uv: ["pypi.org", "files.pythonhosted.org"],
  poetry: ["pypi.org", "files.pythonhosted.org"],
  go: ["proxy.golang.org", "sum.golang.org"],
  cargo: ["index.crates.io", "static.crates.io"],
  bundle: ["rubygems.org", "index.rubygems.org"],
  gem: ["rubygems.org", "index.rubygems.org"],
};

/** What a command line's package managers fetch from: each one it runs, with its hosts. */
export function registriesOf(command: string): { tool: string; hosts: readonly string[] }[] {
  const found = new Map<string, readonly string[]>();
  for (const segment of command.split(/&&|\|\||[;|\n]/)) {
    const words = segment.trim().split(/\s+/);
    // Past `VAR=value` assignments, and `python -m pip` as pip.
    let at = words.findIndex((word) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(word));
    if (at < 0) continue;
    if (/^python3?$/.test(words[at] ?? "") && words[at + 1] === "-m") at += 2;
    const tool = words[at] ?? "";
    const hosts = registries[tool];
    if (hosts) found.set(tool, hosts);
  }
  return [...found].map(([tool, hosts]) => ({ tool, hosts }));
}
