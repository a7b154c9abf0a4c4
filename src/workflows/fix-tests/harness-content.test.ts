import { describe, expect, it } from "vitest";

import { harnessContentChanges, hasHarnessContent } from "./harness-content.js";

const packageJson = (scripts: Record<string, string>, devDependencies: Record<string, string>) =>
  `${JSON.stringify({ name: "calc", version: "1.0.0", scripts, devDependencies }, null, 2)}\n`;

describe("harnessContentChanges: package.json", () => {
  const base = packageJson({ test: "mocha", lint: "eslint ." }, { mocha: "^11.0.0" });

  it("a dependency change leaves the harness alone", () => {
    const patched = packageJson(
      { test: "mocha", lint: "eslint ." },
      { mocha: "^11.1.0", chai: "^5.0.0" },
    );
    expect(harnessContentChanges("package.json", base, patched)).toEqual([]);
  });

  it("names each script changed, added or removed", () => {
    const patched = packageJson({ test: "exit 0", pretest: "true" }, { mocha: "^11.0.0" });
    expect(harnessContentChanges("package.json", base, patched)).toEqual([
      "scripts.lint",
      "scripts.pretest",
      "scripts.test",
    ]);
  });

  it("runner configuration keys and an unreadable file count as changes", () => {
    const withJest = JSON.stringify({ ...JSON.parse(base), jest: { testMatch: ["none"] } });
    expect(harnessContentChanges("web/package.json", base, withJest)).toEqual(["jest"]);
    expect(harnessContentChanges("package.json", base, "{ not json")).toEqual([
      "not valid JSON after the change",
    ]);
  });

  it("a new package.json with scripts is a harness change; removing one too", () => {
    expect(harnessContentChanges("package.json", undefined, base)).toEqual([
      "scripts.lint",
      "scripts.test",
    ]);
    expect(harnessContentChanges("package.json", base, undefined)).toEqual([
      "scripts.lint",
      "scripts.test",
    ]);
  });
});

describe("harnessContentChanges: setup.cfg and pyproject.toml", () => {
  const setupCfg = [
    "[metadata]",
    "name = calc",
    "version = 1.0",
    "",
    "[tool:pytest]",
    "addopts = -q",
    "testpaths = tests",
    "",
  ].join("\n");

  it("packaging metadata is not harness", () => {
    expect(harnessContentChanges("setup.cfg", setupCfg, setupCfg.replace("1.0", "1.1"))).toEqual(
      [],
    );
  });

  it("a change in [tool:pytest], or a line that turns into part of its value, is", () => {
    expect(
      harnessContentChanges("setup.cfg", setupCfg, setupCfg.replace("-q", "-q -k nothing")),
    ).toEqual(["[tool:pytest] or [coverage:*]"]);
    expect(
      harnessContentChanges("setup.cfg", setupCfg, setupCfg.replace("testpaths", "  testpaths")),
    ).toHaveLength(1);
  });

  const pyproject = [
    "[project]",
    'name = "calc"',
    'dependencies = ["attrs"]',
    "",
    "[tool.pytest.ini_options]",
    'addopts = "-q"',
    "",
  ].join("\n");

  it("dependencies in pyproject.toml are not harness; [tool.pytest…] and dotted keys are", () => {
    expect(
      harnessContentChanges(
        "pyproject.toml",
        pyproject,
        pyproject.replace('["attrs"]', '["attrs", "rich"]'),
      ),
    ).toEqual([]);
    expect(
      harnessContentChanges("pyproject.toml", pyproject, pyproject.replace('"-q"', '"-q -x"')),
    ).toHaveLength(1);
    const dotted = `${pyproject}\n[tool]\npytest.ini_options.testpaths = ["nowhere"]\n`;
    expect(harnessContentChanges("pyproject.toml", pyproject, dotted)).toHaveLength(1);
    const escaped = `${pyproject}\n[tool."\\u0070ytest".ini_options]\n`;
    expect(harnessContentChanges("pyproject.toml", pyproject, escaped)).toHaveLength(1);
  });

  it("only these three names are judged by content", () => {
    expect(
      ["package.json", "a/setup.cfg", "pyproject.toml", "Cargo.toml"].map(hasHarnessContent),
    ).toEqual([true, true, true, false]);
  });
});
