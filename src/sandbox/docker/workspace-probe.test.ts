import type Docker from "dockerode";
import { describe, expect, it } from "vitest";

import { hostPermissionsHold } from "./workspace-probe.js";

const engine = (info: () => Promise<unknown>): Docker => ({ info }) as unknown as Docker;

describe("hostPermissionsHold", () => {
  it("trusts host permission bits only where container uids are host uids and no label confines a mount", async () => {
    const withOptions = (...options: string[]) =>
      hostPermissionsHold(engine(() => Promise.resolve({ SecurityOptions: options })));
    expect(await withOptions("name=seccomp,profile=default", "name=apparmor")).toBe(true);
    expect(await withOptions("name=seccomp,profile=default", "name=userns")).toBe(false);
    expect(await withOptions("name=rootless")).toBe(false);
    expect(await withOptions("name=selinux")).toBe(false);
    // An engine that does not say: the sandbox is asked instead.
    expect(await hostPermissionsHold(engine(() => Promise.reject(new Error("gone"))))).toBe(false);
  });
});
