import { describe, expect, it } from "vitest";

import { exitedState } from "./client/testing/fake-container-client.js";
import { fakeEngine } from "./client/testing/fake-engine.js";
import { pruneSupportVolumes, unusedSupportVolumes } from "./support-volume-sweep.js";
import { SupportVolumes } from "./support-volumes.js";

const executor = [{ name: "executor", content: Buffer.from("binary"), mode: 0o755 }];
const hosts = [{ name: "hosts", content: Buffer.from("127.0.0.1\tlocalhost\n"), mode: 0o644 }];

async function engineWithVolumes() {
  const fake = fakeEngine();
  const support = new SupportVolumes(fake.engine);
  const used = await support.ensure("executor", executor, "image:test");
  const bound = await support.ensure("hosts", hosts, "image:test");
  const unused = await support.ensure(
    "executor",
    [{ ...executor[0]!, content: Buffer.from("old") }],
    "image:test",
  );
  // A stopped sandbox mounting the executor's volume, and an older one binding only the hosts
  // file (Docker does not count a bind as a use of the volume).
  fake.containers.add({
    name: "cordon-stopped",
    state: exitedState(143),
    request: {
      Image: "image:test",
      HostConfig: {
        Mounts: [
          { Type: "volume", Source: used.name, Target: "/.cordon", ReadOnly: true },
          {
            Type: "bind",
            Source: `${bound.mountpoint}/hosts`,
            Target: "/etc/hosts",
            ReadOnly: true,
          },
        ],
      },
    },
  });
  return { ...fake, used, bound, unused };
}

describe("support volume sweep", () => {
  it("finds only the data volume no container mounts or binds a file of", async () => {
    const { engine, unused } = await engineWithVolumes();
    const found = await unusedSupportVolumes({
      containers: engine.containers,
      volumes: engine.volumes,
      madeBefore: Infinity,
    });
    expect(found.map((volume) => volume.name)).toEqual([unused.name]);
    expect(found[0]?.holds).toBe("cordon's resident executor binary");
  });

  it("removes it with its marker, keeps the used ones, and a dry run removes nothing", async () => {
    const { engine, volumes, used, bound, unused } = await engineWithVolumes();
    const options = {
      containers: engine.containers,
      volumes: engine.volumes,
      madeBefore: Infinity,
    };
    const before = [...volumes.keys()].sort();
    expect((await pruneSupportVolumes({ ...options, dryRun: true })).map((v) => v.name)).toEqual([
      unused.name,
    ]);
    expect([...volumes.keys()].sort()).toEqual(before);

    const removed = await pruneSupportVolumes({ ...options, dryRun: false });
    expect(removed.map((volume) => volume.name)).toEqual([unused.name]);
    const marker = unused.name.replace(/-[0-9a-f]{8}$/, "");
    expect(volumes.has(unused.name) || volumes.has(marker)).toBe(false);
    expect(volumes.has(used.name) && volumes.has(bound.name)).toBe(true);
  });

  it("leaves volumes made within the grace", async () => {
    const { engine } = await engineWithVolumes();
    const found = await unusedSupportVolumes({
      containers: engine.containers,
      volumes: engine.volumes,
      madeBefore: Date.now() - 60_000,
    });
    expect(found).toEqual([]);
  });
});
