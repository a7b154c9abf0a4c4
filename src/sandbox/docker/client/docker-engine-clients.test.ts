import { describe, expect, it } from "vitest";

import { connectDocker } from "./docker-engine-clients.js";
import { endpointFromHost } from "./engine-endpoint.js";

describe("connectDocker", () => {
  it("connects lazily to unix, tcp, TLS and ssh endpoints", () => {
    // Lazy: nothing is sent until a client is used, so no engine is needed here.
    expect(connectDocker().containers).toBeDefined();
    for (const host of [
      "unix:///run/user/1000/docker.sock",
      "tcp://127.0.0.1:2375",
      "https://build-box:2376",
      "ssh://me@build-box",
    ]) {
      expect(connectDocker(endpointFromHost(host)).containers).toBeDefined();
    }
  });
});
