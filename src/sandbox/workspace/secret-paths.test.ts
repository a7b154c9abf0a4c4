import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { SecretFilter, describeLeftOut, secretShape } from "./secret-paths.js";

describe("secretShape", () => {
  it.each([
    [".env", "secret"],
    [".env.local", "secret"],
    ["app/.env.production", "secret"],
    [".ssh/id_rsa", "secret"],
    ["home/.aws/credentials", "secret"],
    [".gnupg/pubring.kbx", "secret"],
    [".netrc", "secret"],
    [".git-credentials", "secret"],
    ["certs/server.pem", "secret"],
    ["id_rsa", "secret"],
    ["keys/id_ed25519.pub", "secret"],
    [".env.example", "template"],
    ["web/.env.sample", "template"],
    [".env.template", "template"],
    [".npmrc", "token-file"],
    ["pkg/.pypirc", "token-file"],
    ["environment.ts", "plain"],
    [".envrc", "plain"],
    ["src/id_utils.py", "plain"],
    ["pem.txt", "plain"],
    ["docs/ssh.md", "plain"],
  ])("%s is %s", (relative, shape) => {
    expect(secretShape(relative)).toBe(shape);
  });
});

describe("SecretFilter", () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-secrets-"));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("leaves out token files holding a credential only, and names directories once", async () => {
    await writeFile(path.join(root, ".npmrc"), "//registry.npmjs.org/:_authToken=npm_abc\n");
    await mkdir(path.join(root, "pkg"));
    await writeFile(path.join(root, "pkg", ".npmrc"), "save-exact=true\n");
    await writeFile(
      path.join(root, ".pypirc"),
      "[pypi]\nusername = __token__\npassword = pypi-x\n",
    );
    await symlink("/etc/passwd", path.join(root, "link.npmrc"));
    const filter = new SecretFilter({ sourceRoot: root, include: [], tracked: new Set() });
    expect(await filter.leavesOut(".npmrc", "file")).toBe(true);
    expect(await filter.leavesOut("pkg/.npmrc", "file")).toBe(false);
    expect(await filter.leavesOut(".pypirc", "file")).toBe(true);
    expect(await filter.leavesOut(".ssh/id_rsa", "file")).toBe(true);
    expect(await filter.leavesOut(".ssh/config", "file")).toBe(true);
    expect(await filter.leavesOut("src/main.ts", "file")).toBe(false);
    expect(filter.leftOut()).toEqual([".npmrc", ".pypirc", ".ssh/"]);
  });

  it("keeps a tracked template and what seedInclude names; an untracked template goes", async () => {
    const filter = new SecretFilter({
      sourceRoot: root,
      include: [".env.test", "fixtures/keys"],
      tracked: new Set([".env.example"]),
    });
    expect(await filter.leavesOut(".env.example", "file")).toBe(false);
    expect(await filter.leavesOut("web/.env.sample", "file")).toBe(true);
    expect(await filter.leavesOut(".env.test", "file")).toBe(false);
    expect(await filter.leavesOut("fixtures/keys/server.pem", "file")).toBe(false);
    expect(await filter.leavesOut("fixtures/keys.pem", "file")).toBe(true);
    expect(filter.leftOut()).toEqual(["fixtures/keys.pem", "web/.env.sample"]);
  });

  it("says what it left out in one line, with the key that includes a path", () => {
    expect(describeLeftOut([".env", ".ssh/"], "agents.defaults.sandbox.seedInclude")).toBe(
      "left secret-shaped paths out of the seed: .env, .ssh/ (to seed one on purpose, name it in agents.defaults.sandbox.seedInclude)",
    );
  });
});
