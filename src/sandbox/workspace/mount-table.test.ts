import { describe, expect, it } from "vitest";

import { parseMountPoints } from "./mount-table.js";

describe("parseMountPoints", () => {
  it("reads the fifth field of each mountinfo line, decoding the kernel's octal escapes", () => {
    const text = [
      "22 1 254:0 / / rw,relatime - ext4 /dev/vda rw",
      "43 22 7:0 / /tmp/home/workspaces/cordon-a rw,nosuid,nodev,noatime - ext4 /dev/loop0 rw,discard",
      String.raw`44 22 7:1 / /tmp/my\040home/x\011y\134z rw - ext4 /dev/loop1 rw`,
      "45 22 7:0 / /tmp/home/workspaces/cordon-a rw - ext4 /dev/loop0 rw",
      "",
    ].join("\n");
    expect(parseMountPoints(text)).toEqual([
      "/",
      "/tmp/home/workspaces/cordon-a",
      "/tmp/my home/x\ty\\z",
      "/tmp/home/workspaces/cordon-a",
    ]);
  });
});
