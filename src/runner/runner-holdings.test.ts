import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";

import type { SandboxProvider } from "./orchestrate/index.js";
import { holdSandboxes } from "./runner-holdings.js";

describe("holdSandboxes", () => {
  it("close() waits for the backend's background work, and a closed runner acquires nothing", async () => {
    const stateDir = await mkdtemp(path.join(tmpdir(), "cordon-holdings-"));
    try {
      let finish = (): void => undefined;
      const background = new Promise<void>((resolve) => (finish = resolve));
      const provider: SandboxProvider = {
        acquire: () => Promise.reject(new Error("not used")),
        settle: () => background,
      };
      const holdings = holdSandboxes({ provider, stateDir, onClose: "keep" });
      let closed = false;
      const closing = holdings.close().then((done) => {
        closed = true;
        return done;
      });
      // Many turns of the event loop: close() is still waiting for the refill.
      for (let turn = 0; turn < 20; turn += 1) await new Promise((r) => setImmediate(r));
      expect(closed).toBe(false);
      finish();
      expect(await closing).toEqual([]);
      expect(await holdings.close()).toEqual([]);
    } finally {
      await rm(stateDir, { recursive: true, force: true });
    }
  });
});
