import { describe, expect, it } from "vitest";

import { ConfigError } from "../../../common/index.js";
import { connectDocker } from "./docker-engine-clients.js";

describe("connectDocker", () => {
  it("takes unix and tcp DOCKER_HOSTs, and refuses others with a config error naming the fix", () => {
    // Lazy: nothing is sent until a client is used, so no engine is needed here.
    expect(connectDocker(undefined).containers).toBeDefined();
    expect(connectDocker("unix:///run/user/1000/docker.sock").containers).toBeDefined();
    expect(connectDocker("tcp://127.0.0.1:2375").containers).toBeDefined();
    for (const host of ["ssh://me@build-box", "npipe:////./pipe/docker_engine", "not a url"]) {
      let error: unknown;
      try {
        connectDocker(host);
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).message).toContain(host);
      expect((error as ConfigError).fix).toMatch(/unix:\/\/.*tcp:\/\//);
    }
  });
});
