import { describe, expect, it } from "vitest";

import type { PatchedFile } from "../../changes/index.js";
import { protectedKind, protectedPaths, type ProtectionRules } from "./protected-files.js";

describe("protectedKind", () => {
  it.each([
    ["test_pricing.py", "test"],
    ["pkg/pricing_test.go", "test"],
    ["src/sum.test.ts", "test"],
    ["web/app.spec.jsx", "test"],
    ["tests/helpers.py", "test"],
    ["src/__tests__/x.js", "test"],
    ["src/test/java/FooTest.java", "test"],
    ["spec/models/user_spec.rb", "test"],
    [".github/workflows/ci.yml", "ci"],
    [".gitlab-ci.yml", "ci"],
    ["Jenkinsfile", "ci"],
    ["package-lock.json", "lockfile"],
    ["backend/poetry.lock", "lockfile"],
    ["go.sum", "lockfile"],
    ["Makefile", "harness"],
    ["lib/GNUmakefile", "harness"],
    ["build/rules.mk", "harness"],
    ["CMakeLists.txt", "harness"],
    ["src/CMakeLists.txt", "harness"],
    ["cmake/Warnings.cmake", "harness"],
    ["CMakePresets.json", "harness"],
    [".npmrc", "harness"],
    [".yarnrc.yml", "harness"],
    [".yarn/releases/yarn-4.1.0.cjs", "harness"],
    ["pytest.ini", "harness"],
    ["tox.ini", "harness"],
    ["conftest.py", "harness"],
    ["src/pkg/conftest.py", "harness"],
    ["sitecustomize.py", "harness"],
    ["lib/usercustomize.py", "harness"],
    ["zz_hook.pth", "harness"],
    ["jest.config.js", "harness"],
    ["vitest.config.mts", "harness"],
    ["vite.config.ts", "harness"],
    [".mocharc.yml", "harness"],
    ["karma.conf.js", "harness"],
    ["playwright.config.ts", "harness"],
    [".cargo/config.toml", "harness"],
  ])("%s is %s", (file, kind) => {
    expect(protectedKind(file)).toBe(kind);
  });

  it.each([
    "pricing.py",
    "src/latest.ts",
    "src/contest.py",
    "docs/testing.md",
    "attest.go",
    "Cargo.toml",
    "package.json",
    "src/make.py",
    "docs/Makefile.md",
    "docs/CMakeLists.txt.md",
    "jest.js",
  ])("%s is ordinary code", (file) => {
    expect(protectedKind(file)).toBeUndefined();
  });
});

describe("protectedPaths", () => {
  const rules: ProtectionRules = { testCommand: "python3 -m unittest -v" };
  const added = (path: string): PatchedFile => ({ path, change: "added", binary: false });
  const modified = (path: string): PatchedFile => ({ path, change: "modified", binary: false });
  const names = (files: PatchedFile[], with_ = rules): string[] => [
    ...protectedPaths(files, with_).keys(),
  ];

  it("a new top-level module named like the standard library or a runner is harness", () => {
    expect(
      names([
        added("unittest.py"),
        added("pytest.py"),
        added("test.py"),
        added("traceback.pyc"),
        added("json/__init__.py"),
      ]),
    ).toEqual(["unittest.py", "pytest.py", "test.py", "traceback.pyc", "json/__init__.py"]);
  });

  it("changing the project's own calendar.py, or a new module deeper down, is ordinary work", () => {
    expect(names([modified("calendar.py"), added("app/unittest.py"), added("pricing.py")])).toEqual(
      [],
    );
  });

  it("a rename that moves the Makefile away protects both its names", () => {
    const moved: PatchedFile = {
      path: "Makefile.old",
      from: "Makefile",
      change: "renamed",
      binary: false,
    };
    expect(names([moved])).toEqual(["Makefile"]);
  });

  it("a script the test command names is harness, whatever its name", () => {
    const command = { testCommand: "bash ./scripts/check.sh && python3 tools/run.py -q" };
    expect(names([modified("scripts/check.sh"), modified("tools/run.py")], command)).toEqual([
      "scripts/check.sh",
      "tools/run.py",
    ]);
  });

  it("fixTests.protect globs add files: a bare glob matches in any directory, a path from the root", () => {
    const protect = { ...rules, protect: ["*.sql", "/fixtures-data/**"] };
    expect(
      names(
        [
          modified("db/schema.sql"),
          modified("fixtures-data/a/b.json"),
          modified("src/fixtures-data/c.json"),
        ],
        protect,
      ),
    ).toEqual(["db/schema.sql", "fixtures-data/a/b.json"]);
  });
});
