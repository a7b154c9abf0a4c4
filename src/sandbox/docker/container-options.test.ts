import { describe, expect, it } from "vitest";

import { testSandboxSpec } from "../../../test/support/sandbox-spec.js";
import { createContainerOptions } from "./container-options.js";

describe("createContainerOptions", () => {
  it("runs the container's own processes (init, the keep-alive) as initUser, not the agent's user", () => {
    const spec = testSandboxSpec("user", { docker: { user: "1001:118" } });
    const request = createContainerOptions({
      spec,
      image: "cordon-sandbox:test",
      createdAt: "2026-01-01T00:00:00.000Z",
    });
    expect(spec.docker.initUser).toBe("65534:65534");
    expect(request.User).toBe("65534:65534");
    expect(request.HostConfig.Init).toBe(true);
    expect(request.Entrypoint).toEqual(["sleep"]);
  });
});
