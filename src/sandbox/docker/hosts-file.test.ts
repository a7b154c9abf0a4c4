import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, describe, expect, it } from "vitest";

import { ensureHostsFile, hostsFileContent } from "./hosts-file.js";

describe("hostsFileContent", () => {
  it("names localhost for IPv4 and IPv6", () => {
    expect(hostsFileContent([])).toBe(
      "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    );
  });

  it("adds extra hosts, IPv6 addresses whole, and leaves out host-gateway", () => {
    const content = hostsFileContent(["db:127.0.0.2", "v6:fd00::1", "host:host-gateway"]);
    expect(content).toContain("127.0.0.2\tdb\n");
    expect(content).toContain("fd00::1\tv6\n");
    expect(content).not.toContain("host-gateway");
  });
});

describe("ensureHostsFile", () => {
  const directories: string[] = [];
  afterEach(async () => {
    await Promise.all(directories.map((dir) => rm(dir, { recursive: true, force: true })));
  });

  it("writes one world-readable file per content and reuses it", async () => {
    const home = await mkdtemp(path.join(tmpdir(), "cordon-hosts-"));
    directories.push(home);
    const first = await ensureHostsFile(home, ["db:127.0.0.2"]);
    const again = await ensureHostsFile(home, ["db:127.0.0.2"]);
    const other = await ensureHostsFile(home, []);
    expect(again).toBe(first);
    expect(other).not.toBe(first);
    expect(await readFile(first, "utf8")).toBe(hostsFileContent(["db:127.0.0.2"]));
    expect((await stat(first)).mode & 0o777).toBe(0o644);
  });
});
