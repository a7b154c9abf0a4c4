import { describe, expect, it } from "vitest";

import { fakeEngine } from "./client/testing/fake-engine.js";
import { SupportVolumes } from "./support-volumes.js";

const files = [{ name: "executor", content: Buffer.from("binary"), mode: 0o755 }];

describe("SupportVolumes", () => {
  it("fills a volume of its own, then names it in the marker, and asks the engine once", async () => {
    const { engine, containers, volumes } = fakeEngine();
    const support = new SupportVolumes(engine);
    const data = await support.ensure("executor", files, "image:test");
    const marker = [...volumes.values()].find((v) => v.labels["cordon.support"] === "executor");
    expect(marker?.labels["cordon.support.data"]).toBe(data.name);
    expect(data.name.startsWith(`${marker?.name}-`)).toBe(true);
    expect(containers.methods()).toEqual(["create", "putArchive", "remove"]);
    await support.ensure("executor", files, "image:test");
    expect(containers.methods()).toHaveLength(3);
  });

  it("uses the volume another process filled, and removes its own when it lost the race", async () => {
    const { engine, volumes } = fakeEngine();
    const first = await new SupportVolumes(engine).ensure("executor", files, "image:test");
    // Another process found no marker, filled, and creates the marker second.
    const second = new SupportVolumes(engine);
    const marker = [...volumes.keys()].find((name) => !name.startsWith(`${first.name}`))!;
    const saved = volumes.get(marker)!;
    volumes.delete(marker);
    const racing = second.ensure("executor", files, "image:test");
    volumes.set(marker, saved);
    expect((await racing).name).toBe(first.name);
    expect([...volumes.keys()].sort()).toEqual([first.name, marker].sort());
  });

  it("fills again when the files were removed under the marker", async () => {
    const { engine, volumes } = fakeEngine();
    const first = await new SupportVolumes(engine).ensure("executor", files, "image:test");
    volumes.delete(first.name);
    const again = await new SupportVolumes(engine).ensure("executor", files, "image:test");
    expect(again.name).not.toBe(first.name);
    expect(volumes.has(again.name)).toBe(true);
  });
});

describe("SupportVolumes.createContainer", () => {
  const requestMounting = (volume: string) => () =>
    Promise.resolve({
      name: "cordon-sandbox",
      Image: "image:test",
      HostConfig: {
        Mounts: [{ Type: "volume" as const, Source: volume, Target: "/.cordon", ReadOnly: true }],
      },
    });

  it("creates once when the volumes it mounts are still the filled ones", async () => {
    const { engine, containers } = fakeEngine();
    const support = new SupportVolumes(engine);
    const data = await support.ensure("executor", files, "image:test");
    const id = await support.createContainer(requestMounting(data.name));
    expect(containers.find(id!)?.name).toBe("cordon-sandbox");
    expect(containers.methods().filter((m) => m === "create")).toHaveLength(2);
  });

  it("makes the volume again when a prune removed it and Docker made an empty one in its place", async () => {
    const { engine, containers, volumes } = fakeEngine();
    const support = new SupportVolumes(engine);
    const first = await support.ensure("executor", files, "image:test");
    let pruned = false;
    containers.before.create = (request) => {
      const mounts = (request as { HostConfig?: { Mounts?: { Source: string }[] } }).HostConfig
        ?.Mounts;
      if (pruned || mounts?.[0]?.Source !== first.name) return;
      // A prune in another process, then the engine's silent create of a volume by that name.
      pruned = true;
      volumes.set(first.name, { ...first, labels: {} });
    };
    const id = await support.createContainer(async () =>
      requestMounting((await support.ensure("executor", files, "image:test")).name)(),
    );
    const made = containers.find(id!)?.request?.HostConfig?.Mounts?.[0]?.Source;
    expect(made).not.toBe(first.name);
    expect(volumes.get(made!)?.labels["cordon.support"]).toBe("executor-data");
    // The empty impostor went, and the container made with it.
    expect(volumes.has(first.name)).toBe(false);
    expect([...containers.containers.values()].map((c) => c.name)).toEqual(["cordon-sandbox"]);
  });

  it("makes the hosts file again when its bind source was removed before the create", async () => {
    const { engine, containers, volumes } = fakeEngine();
    const support = new SupportVolumes(engine);
    const first = await support.ensure("hosts", files, "image:test");
    let failed = false;
    containers.before.create = () => {
      if (failed || volumes.has(first.name)) return;
      failed = true;
      throw new Error("invalid mount config: bind source path does not exist");
    };
    volumes.delete(first.name);
    const id = await support.createContainer(async () => {
      const data = await support.ensure("hosts", files, "image:test");
      return {
        name: "cordon-sandbox",
        Image: "image:test",
        HostConfig: {
          Mounts: [
            {
              Type: "bind" as const,
              Source: `${data.mountpoint}/executor`,
              Target: "/etc/hosts",
              ReadOnly: true,
            },
          ],
        },
      };
    });
    expect(failed).toBe(true);
    expect(containers.find(id!)?.request?.HostConfig?.Mounts?.[0]?.Source).not.toContain(
      first.name,
    );
  });
});
