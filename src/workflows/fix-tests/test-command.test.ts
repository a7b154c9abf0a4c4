import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { packageRoot } from "../../common/index.js";
import { findTestCommand } from "./test-command.js";

const fixture = (name: string): string =>
  path.join(packageRoot(), "test", "fixtures", "fix-tests", name);

describe("findTestCommand", () => {
  it.each([
    ["calc-make", "make test", "the Makefile's test target"],
    ["textbuf-make", "make test", "the Makefile's test target"],
    ["calc-npm", "npm test", "package.json's scripts.test"],
    ["go-calc", "go test ./...", "go.mod"],
    ["rates-pytest", "python3 -m pytest", "pytest's configuration in pyproject.toml"],
    ["calc-python", "python3 -m pytest", "test_*.py files in the repository"],
    [
      "semver-cmake",
      "cmake -S . -B build && cmake --build build && ctest --test-dir build --output-on-failure",
      "CMakeLists.txt",
    ],
    ["bats-shim", "bats test", ".bats files in test/"],
  ])("finds what %s declares", async (name, command, source) => {
    expect(await findTestCommand(fixture(name))).toEqual({ command, source });
  });

  describe("in repositories made here", () => {
    let root: string;
    let count = 0;
    const repository = async (files: Record<string, string>): Promise<string> => {
      const dir = path.join(root, String((count += 1)));
      for (const [name, text] of Object.entries(files)) {
        await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
        await writeFile(path.join(dir, name), text);
      }
      await mkdir(dir, { recursive: true });
      return dir;
    };
    beforeAll(async () => {
      root = await mkdtemp(path.join(tmpdir(), "cordon-test-command-"));
    });
    afterAll(() => rm(root, { recursive: true, force: true }));

    it("takes the package manager from the lockfile, and never npm init's placeholder", async () => {
      const scripts = JSON.stringify({ scripts: { test: "vitest run" } });
      expect(
        (await findTestCommand(await repository({ "package.json": scripts, "pnpm-lock.yaml": "" })))
          ?.command,
      ).toBe("pnpm test");
      expect(
        (await findTestCommand(await repository({ "package.json": scripts, "yarn.lock": "" })))
          ?.command,
      ).toBe("yarn test");
      const placeholder = JSON.stringify({
        scripts: { test: 'echo "Error: no test specified" && exit 1' },
      });
      expect(await findTestCommand(await repository({ "package.json": placeholder }))).toBe(
        undefined,
      );
    });

    it("prefers the Makefile's target to the ecosystem's convention, and takes check when there is no test", async () => {
      const both = await repository({
        Makefile: "all:\n\tcc x.c\n\ncheck: all\n\t./run-tests\n",
        "go.mod": "module x\n",
      });
      expect(await findTestCommand(both)).toEqual({
        command: "make check",
        source: "the Makefile's check target",
      });
      // A variable assignment is not a target.
      const assignment = await repository({ Makefile: "test := $(wildcard t/*.c)\n" });
      expect(await findTestCommand(assignment)).toBe(undefined);
    });

    it("reads no file through a link, and finds nothing in a repository that declares nothing", async () => {
      const elsewhere = await repository({ Makefile: "test:\n\ttrue\n" });
      const linked = await repository({ "README.md": "# x\n" });
      await symlink(path.join(elsewhere, "Makefile"), path.join(linked, "Makefile"));
      expect(await findTestCommand(linked)).toBe(undefined);
      expect(await findTestCommand(path.join(root, "missing"))).toBe(undefined);
    });
  });
});
