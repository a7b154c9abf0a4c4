import { describe, expect, it } from "vitest";

import type { EngineDetails, SystemClient } from "./client/index.js";
import { hostPermissionsHold } from "./workspace-probe.js";

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
