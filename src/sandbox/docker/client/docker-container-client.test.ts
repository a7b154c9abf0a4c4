import type Docker from "dockerode";
import { describe, expect, it } from "vitest";

import { SandboxError } from "../../../common/index.js";
import { DockerContainerClient } from "./docker-container-client.js";

describe("DockerContainerClient.exec", () => {
  it("refuses a command that names no user, before the engine hears of it", async () => {
    const reached: string[] = [];
    const engine = {
      getContainer: (name: string) => {
        reached.push(name);
        throw new Error("the engine was asked");
      },
    } as unknown as Docker;
    const client = new DockerContainerClient(engine);
    for (const user of ["", "  "]) {
      const started = client.exec("sandbox", { cmd: ["true"], user, attachStdin: false });
      await expect(started).rejects.toBeInstanceOf(SandboxError);
      await expect(started).rejects.toThrow(/without naming its user/);
    }
    expect(reached).toEqual([]);
  });
});
