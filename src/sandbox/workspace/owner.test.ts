import type { Stats } from "node:fs";

import { describe, expect, it } from "vitest";

import { parseContainerUser, permissionsFor } from "./owner.js";

const stats = (uid: number, gid: number, mode: number, directory = true): Stats =>
  ({ uid, gid, mode, isDirectory: () => directory }) as Stats;

describe("parseContainerUser", () => {
  it.each([
    ["1000:1000", { uid: 1000, gid: 1000 }],
    ["1000", { uid: 1000, gid: 1000 }],
    ["0:0", { uid: 0, gid: 0 }],
    [" 501:20 ", { uid: 501, gid: 20 }],
  ])("reads %j", (user, owner) => {
    expect(parseContainerUser(user)).toEqual(owner);
  });

  it.each(["sandbox", "sandbox:sandbox", "1000:staff", "", "-1"])("cannot map %j", (user) => {
    expect(parseContainerUser(user)).toBeUndefined();
  });
});

describe("permissionsFor", () => {
  const user = { uid: 1000, gid: 1000 };
  it("uses the owner, group or other bits that apply", () => {
    expect(permissionsFor(user, stats(1000, 0, 0o700))).toEqual({ read: true, write: true });
    expect(permissionsFor(user, stats(0, 1000, 0o750))).toEqual({ read: true, write: false });
    expect(permissionsFor(user, stats(0, 0, 0o755))).toEqual({ read: true, write: false });
    expect(permissionsFor(user, stats(0, 0, 0o777))).toEqual({ read: true, write: true });
    expect(permissionsFor(user, stats(0, 0, 0o700))).toEqual({ read: false, write: false });
  });

  it("needs search permission on a directory", () => {
    expect(permissionsFor(user, stats(0, 0, 0o776))).toEqual({ read: false, write: false });
  });

  it("lets root do anything", () => {
    expect(permissionsFor({ uid: 0, gid: 0 }, stats(1000, 1000, 0o700))).toEqual({
      read: true,
      write: true,
    });
  });
});
