import { describe, expect, it } from "vitest";

import { FakeContainerClient, exitedState } from "./client/testing/fake-container-client.js";
import { isBusy } from "./container-activity.js";
import { executorContainerPath } from "./resident/executor-binary.js";

describe("isBusy", () => {
  it("counts what runs beside init, sleep and cordon's executor; doubt counts as busy", async () => {
    const client = new FakeContainerClient();
    const idle = client.add({
      name: "idle",
      processes: ["/sbin/docker-init -- sleep infinity", "sleep infinity", executorContainerPath],
    });
    const working = client.add({
      name: "working",
      processes: [
        "/sbin/docker-init -- sleep infinity",
        "sleep infinity",
        "python3 -m http.server",
      ],
    });
    const stopped = client.add({ name: "stopped", state: exitedState(0) });
    expect(await isBusy(client, idle.id)).toBe(false);
    expect(await isBusy(client, working.id)).toBe(true);
    // The engine cannot say (not running, gone): never destroy on doubt.
    expect(await isBusy(client, stopped.id)).toBe(true);
    expect(await isBusy(client, "no-such-container")).toBe(true);
  });
});
