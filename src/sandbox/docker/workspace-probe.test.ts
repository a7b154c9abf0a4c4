import { describe, expect, it } from "vitest";

import type { SandboxSpec } from "../spec.js";
import type { EngineDetails, SystemClient } from "./client/index.js";
import { FakeContainerClient } from "./client/testing/fake-container-client.js";
import { assertWorkspaceWritable, hostPermissionsHold } from "./workspace-probe.js";

const engine = (securityOptions: string[] | Error): SystemClient => ({
  describe: () =>
    securityOptions instanceof Error
      ? Promise.reject(securityOptions)
      : Promise.resolve({ securityOptions } as EngineDetails),
});

describe("hostPermissionsHold", () => {
  it("trusts host permission bits only where container uids are host uids and no label confines a mount", async () => {
    const withOptions = (...options: string[]) => hostPermissionsHold(engine(options));
    expect(await withOptions("name=seccomp,profile=default", "name=apparmor")).toBe(true);
    expect(await withOptions("name=seccomp,profile=default", "name=userns")).toBe(false);
    expect(await withOptions("name=rootless")).toBe(false);
    expect(await withOptions("name=selinux")).toBe(false);
    // An engine that does not say: the sandbox is asked instead.
    expect(await hostPermissionsHold(engine(new Error("gone")))).toBe(false);
  });
});

describe("assertWorkspaceWritable", () => {
  const spec = (readOnly = false): SandboxSpec =>
    ({
      containerName: "cordon-unit-probe",
      workspaceAccess: "none",
      docker: { user: "1000:1000" },
      // A copy in volumes: its host path does not exist.
      mounts: [
        { role: "workspace", source: "/nonexistent/cordon/copy", target: "/workspace", readOnly },
      ],
    }) as unknown as SandboxSpec;
  const probes = async (
    options: Parameters<typeof assertWorkspaceWritable>[3],
    readOnly = false,
  ): Promise<number> => {
    const containers = new FakeContainerClient();
    // The fake runs no process: a probe shows as an exec call, then fails.
    await assertWorkspaceWritable(containers, "id", spec(readOnly), options).catch(() => undefined);
    return containers.calls.filter((call) => call.method === "exec").length;
  };

  it("asks nothing of a copy this acquire made in volumes, where the engine keeps uids as written", async () => {
    expect(await probes({ hostPermissionsHold: true, madeInVolumes: true })).toBe(0);
  });

  it("asks the sandbox about an existing copy in volumes, a read-only mount, or a remapping engine", async () => {
    expect(await probes({ hostPermissionsHold: true, madeInVolumes: false })).toBe(1);
    expect(await probes({ hostPermissionsHold: true, madeInVolumes: true }, true)).toBe(1);
    expect(await probes({ hostPermissionsHold: false, madeInVolumes: true })).toBe(1);
  });
});
