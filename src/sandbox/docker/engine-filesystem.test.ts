import { describe, expect, it } from "vitest";

import { ConfigError } from "../../common/index.js";
import { endpointFromHost } from "./client/engine-endpoint.js";
import { remoteEngineRefusal } from "./engine-filesystem.js";

describe("remoteEngineRefusal", () => {
  const local = endpointFromHost(undefined);
  const remote = endpointFromHost("ssh://builder@build-box");
  const spec = (workspaceAccess: "none" | "ro" | "rw") => ({
    workspaceAccess,
    agentWorkspace: "/home/me/project",
  });

  it("lets a private copy run on an engine elsewhere: it lives in volumes there", () => {
    expect(remote.sharesFilesystem).toBe(false);
    expect(remoteEngineRefusal(remote, spec("none"))).toBeUndefined();
  });

  it("refuses ro and rw there, which bind this host's path, naming the fix", () => {
    for (const access of ["ro", "rw"] as const) {
      const refusal = remoteEngineRefusal(remote, spec(access));
      expect(refusal).toBeInstanceOf(ConfigError);
      expect(refusal?.message).toBe(
        `workspaceAccess "${access}" binds /home/me/project into the sandbox, and the Docker engine at ssh://builder@build-box, given by the caller does not share this host's filesystem`,
      );
      expect(refusal?.fix).toMatch(/^set workspaceAccess "none".*`cordon apply`/);
    }
  });

  it("refuses docker.binds there; the CA bundle travels in a support volume", () => {
    const ca = {
      source: "/etc/ssl/certs/ca-certificates.crt",
      target: "/usr/local/share/cordon/host-ca-certificates.crt",
      role: "ca-certificates" as const,
    };
    const copy = {
      source: "/home/me/.cordon/workspaces/x",
      target: "/workspace",
      role: "workspace" as const,
    };
    const mounts = [{ source: "/home/me/data", target: "/data", role: "bind" as const }, ca, copy];
    const refusal = remoteEngineRefusal(remote, { ...spec("none"), mounts });
    expect(refusal).toBeInstanceOf(ConfigError);
    expect(refusal?.message).toMatch(
      /^the sandbox binds this host's \/home\/me\/data at \/data, and the Docker engine at ssh:/,
    );
    expect(refusal?.fix).toMatch(/remove those sandbox\.docker\.binds.*project image/);
    expect(remoteEngineRefusal(local, { ...spec("none"), mounts })).toBeUndefined();
    // The copy's own mount is not a host path there (volumes), nor the CA bundle.
    expect(remoteEngineRefusal(remote, { ...spec("none"), mounts: [ca, copy] })).toBeUndefined();
  });

  it("refuses nothing on a local engine", () => {
    for (const access of ["none", "ro", "rw"] as const) {
      expect(remoteEngineRefusal(local, spec(access))).toBeUndefined();
    }
  });
});
