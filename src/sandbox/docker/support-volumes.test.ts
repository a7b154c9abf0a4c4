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
