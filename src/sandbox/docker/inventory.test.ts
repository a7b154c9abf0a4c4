import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { AbortedError } from "../../common/index.js";
import { fakeEngine } from "./client/testing/fake-engine.js";
import { labelKeys } from "./container-options.js";
import { readFreezeMarker } from "./freeze-marker.js";
import { SandboxInventory } from "./inventory.js";
import { holdFreezeUntilReleased } from "./testing/held-freeze.js";

/** Removal behind another command's freeze, over a fake engine. */
describe("SandboxInventory removing a sandbox another command has frozen", () => {
  let home: string;
  let fake: ReturnType<typeof fakeEngine>;
  let inventory: SandboxInventory;

  /** A sandbox container of this state directory, as the manager labels one. */
  const sandbox = (name: string) =>
    fake.containers.add({
      name,
      labels: { [labelKeys.managed]: "true", [labelKeys.home]: path.resolve(home) },
    });

  beforeEach(async () => {
    home = await mkdtemp(path.join(tmpdir(), "cordon-inventory-unit-"));
    fake = fakeEngine();
    inventory = new SandboxInventory({ engine: fake.engine, stateDirectory: home });
  });
  afterEach(async () => {
    await rm(home, { recursive: true, force: true });
  });

  it("stops waiting when its signal aborts: nothing removed, the other command's marker left as it was", async () => {
    sandbox("cordon-frozen");
    const other = await holdFreezeUntilReleased(home, "cordon-frozen");
    const marker = await readFreezeMarker(home, "cordon-frozen");
    const controller = new AbortController();
    // Ctrl-C as the user sees the wait announced (after 1 s).
    const waits: string[] = [];
    const removal = inventory.remove("cordon-frozen", {
      discardChanges: true,
      signal: controller.signal,
      onWait: (message) => {
        waits.push(message);
        controller.abort(new Error("Ctrl-C"));
      },
    });
    try {
      await expect(removal).rejects.toThrow(AbortedError);
      expect(waits).toHaveLength(1);
      expect(fake.containers.find("cordon-frozen")).toBeDefined();
      expect(await readFreezeMarker(home, "cordon-frozen")).toEqual(marker);
    } finally {
      await other.release();
    }
    expect(await readFreezeMarker(home, "cordon-frozen")).toBeUndefined();
  }, 20_000);

  it("removeAll stops at the frozen one and returns what it removed before", async () => {
    sandbox("cordon-a-free");
    sandbox("cordon-b-frozen");
    sandbox("cordon-c-after");
    const other = await holdFreezeUntilReleased(home, "cordon-b-frozen");
    const controller = new AbortController();
    try {
      const { removed, refused } = await inventory.removeAll({
        discardChanges: true,
        signal: controller.signal,
        onWait: () => controller.abort(new Error("Ctrl-C")),
      });
      expect(removed.map((entry) => entry.name)).toEqual(["cordon-a-free"]);
      expect(refused).toEqual([]);
      expect(fake.containers.find("cordon-a-free")).toBeUndefined();
      expect(fake.containers.find("cordon-b-frozen")).toBeDefined();
      expect(fake.containers.find("cordon-c-after")).toBeDefined();
    } finally {
      await other.release();
    }
  }, 20_000);
});
