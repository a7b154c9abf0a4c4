import { describe, expect, it } from "vitest";

import { fakeEngine } from "./client/testing/fake-engine.js";
import { ensureHostsFile, hostsFileContent } from "./hosts-file.js";
import { SupportVolumes } from "./support-volumes.js";

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
  it("is a file in a volume on the engine, one per content, reused", async () => {
    const { engine, containers } = fakeEngine();
    containers.imageIds.set("image:test", "sha256:1");
    const support = new SupportVolumes(engine);
    const first = await ensureHostsFile(support, ["db:127.0.0.2"], "image:test");
    const again = await ensureHostsFile(support, ["db:127.0.0.2"], "image:test");
    const other = await ensureHostsFile(support, [], "image:test");
    expect(first.path).toBe(`/var/lib/docker/volumes/${first.volume}/_data/hosts`);
    expect(first.path).toMatch(
      /^\/var\/lib\/docker\/volumes\/cordon-hosts-[0-9a-f]{16}-[0-9a-f]{8}\/_data\/hosts$/,
    );
    expect(again).toEqual(first);
    expect(other).not.toEqual(first);
    // Two fillings (two contents), each archive put into a container that was then removed.
    expect(containers.methods().filter((m) => m === "putArchive")).toHaveLength(2);
    expect(containers.containers.size).toBe(0);
  });
});
