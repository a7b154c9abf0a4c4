/**
 * No secret-shaped file reaches a sandbox by surprise: a folder that is no git repository, seeded
 * through the CLI into a real container, with `.env`, an SSH key and an npm token beside its code.
 */
import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { requireSandboxImage } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import { runBuiltCordon } from "../support/spawn-cordon.js";
import { removeStateDirectory } from "../support/state-directory.js";

const sandboxUid = process.getuid?.() === 0 ? 1000 : (process.getuid?.() ?? 1000);

describe("seeding leaves secret-shaped files out", () => {
  let root: string;
  let home: string;
  let folder: string;
  const env = (config = ""): NodeJS.ProcessEnv => ({ CORDON_HOME: home, CORDON_CONFIG: config });
  const listIn = (session: string, config = "") =>
    runCordon(
      [
        "exec",
        "--workspace",
        folder,
        "--session",
        session,
        "--",
        "find . -path ./.git -prune -o -type f -print | sort",
      ],
      env(config),
    );

  beforeAll(async () => {
    await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-secrets-"));
    home = path.join(root, "home");
    folder = path.join(root, "notes");
    const files: Record<string, string> = {
      "app.py": "print('hi')\n",
      ".env": "API_KEY=sk-live-123\n",
      ".ssh/id_ed25519": "-----BEGIN OPENSSH PRIVATE KEY-----\n",
      ".npmrc": "//registry.npmjs.org/:_authToken=npm_live\n",
    };
    for (const [name, content] of Object.entries(files)) {
      await mkdir(path.dirname(path.join(folder, name)), { recursive: true });
      await writeFile(path.join(folder, name), content);
    }
    if (process.getuid?.() === 0) {
      execFileSync("chown", ["-R", `${sandboxUid}:${sandboxUid}`, folder]);
    }
  });

  afterAll(async () => {
    await runCordon(["sandbox", "rm", "--all", "--discard-changes"], env());
    await removeStateDirectory(home);
    await rm(root, { recursive: true, force: true });
  });

  it("copies the code, says it is no repository and what it left out, with the key", async () => {
    const listed = await listIn("plain");
    expect(listed.exitCode, listed.stderr).toBe(0);
    expect(listed.stdout).toBe("./app.py\n");
    expect(listed.stderr).toMatch(/not a git repository: copied 1 file, 1 kB/);
    expect(listed.stderr).toContain(
      "left secret-shaped paths out of the seed: .env, .npmrc, .ssh/ (to seed one on purpose, name it in sandbox.seedInclude)",
    );
  });

  it("seeds a path sandbox.seedInclude names in a config the user chose", async () => {
    const config = path.join(root, "cordon.json5");
    await writeFile(config, '{ agents: { defaults: { sandbox: { seedInclude: [".env"] } } } }\n');
    const listed = await listIn("included", config);
    expect(listed.exitCode, listed.stderr).toBe(0);
    expect(listed.stdout).toBe("./.env\n./app.py\n");
  });

  it("refuses seedInclude from a config found in the workspace until it is trusted", async () => {
    await writeFile(
      path.join(folder, "cordon.json5"),
      '{ agents: { defaults: { sandbox: { seedInclude: [".ssh"] } } } }\n',
    );
    const { CORDON_CONFIG: _unset, ...inherited } = process.env;
    const refused = await runBuiltCordon(["exec", "--session", "found", "--", "ls", "-A"], {
      env: { ...inherited, CORDON_HOME: home, CORDON_LOG_LEVEL: "silent" },
      cwd: folder,
    });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("sandbox.seedInclude");
    await rm(path.join(folder, "cordon.json5"));
  });
});
