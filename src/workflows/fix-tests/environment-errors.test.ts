import { describe, expect, it } from "vitest";

import { classifyEnvironmentError, projectNamesOf } from "./environment-errors.js";

const project = projectNamesOf(
  ["calc.py", "test_calc.py", "src/inventory/__init__.py", "lib/util.js"].join("\n"),
);

function classify(output: string, exitCode: number | null = 1, network: "none" | "some" = "none") {
  return classifyEnvironmentError({ exitCode, output, network, projectNames: project });
}

describe("classifyEnvironmentError", () => {
  it.each([
    ["bash: line 1: pytest: command not found", 127, "`pytest` is not installed"],
    ["> calc@1.0.0 test\n> mocha\n\nsh: 1: mocha: not found", 127, "`mocha` is not installed"],
    [
      "cc -O2 -o test_calc test_calc.c\nmake: cc: No such file or directory\nmake: *** [Makefile:16: test_calc] Error 127",
      2,
      "a command the Makefile runs",
    ],
  ])("a missing command: %j", (output, exitCode, problem) => {
    const found = classify(output, exitCode);
    expect(found?.kind).toBe("command_not_found");
    expect(found?.problem).toContain(problem);
    expect(found?.fix).toMatch(/--carry node_modules.*--setup-cmd.*sandbox\.docker\.image/);
  });

  it("a third-party module that is not installed is the environment; the project's own is the agent's", () => {
    const missing = classify(
      "ImportError while importing test module '/workspace/test_calc.py'.\nE   ModuleNotFoundError: No module named 'requests'",
    );
    expect(missing).toMatchObject({
      kind: "module_not_found",
      evidence: "E   ModuleNotFoundError: No module named 'requests'",
    });
    expect(missing?.fix).toMatch(/--carry \.venv/);
    // calc.utils under the project's calc: a bug in the code under test.
    expect(classify("ModuleNotFoundError: No module named 'calc.utils'")).toBeUndefined();
    expect(classify("ModuleNotFoundError: No module named 'inventory'")).toBeUndefined();
  });

  it("node: a bare package that is missing is the environment; a relative path is the code", () => {
    expect(
      classify("Error: Cannot find module 'chai'\nRequire stack:\n- /workspace/test/calc.test.js")
        ?.kind,
    ).toBe("module_not_found");
    expect(
      classify(
        "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'vitest' imported from /workspace/vitest.config.js",
      )?.problem,
    ).toContain("`vitest`");
    expect(classify("Error: Cannot find module '@scope/tool/bin'")?.problem).toContain(
      "`@scope/tool`",
    );
    expect(classify("Error: Cannot find module './calc'")).toBeUndefined();
  });

  it("npm's missing script names the test command", () => {
    const found = classify(
      'npm error Missing script: "test:unit"\nnpm error\nnpm error To see a list of scripts, run:',
    );
    expect(found).toMatchObject({
      kind: "missing_script",
      problem: 'package.json has no "test:unit" script',
    });
  });

  it("name resolution and offline installs count only when the sandbox has no network", () => {
    const output =
      "npm error code EAI_AGAIN\nnpm error request to https://registry.npmjs.org/left-pad failed";
    expect(classify(output)?.kind).toBe("no_network");
    expect(classify(output)?.fix).toMatch(/--setup-allow-host.*--allow-host/);
    expect(classify("npm error code ENOTCACHED")?.kind).toBe("no_network");
    expect(classify(output, 1, "some")).toBeUndefined();
  });

  it("a read-only file system and a denied permission", () => {
    expect(
      classify("Error: EROFS: read-only file system, mkdir '/workspace/node_modules/.vite-temp'")
        ?.kind,
    ).toBe("read_only_file_system");
    expect(classify("bash: line 1: ./run-tests.sh: Permission denied", 126)?.kind).toBe(
      "permission_denied",
    );
  });

  it("leaves a real test failure to the agent", () => {
    const pytest = [
      "____________________ test_mean_of_three ____________________",
      "E       assert 1.5 == 2",
      "FAILED test_calc.py::test_mean_of_three - assert 1.5 == 2",
      "========================= 1 failed, 3 passed in 0.02s =========================",
    ].join("\n");
    expect(classify(pytest)).toBeUndefined();
    expect(classify("make: *** [Makefile:13: test] Error 1", 2)).toBeUndefined();
    expect(classify("", 0)).toBeUndefined();
  });

  it("exit 127 with nothing recognisable is still a missing command", () => {
    expect(classify("", 127)).toMatchObject({
      kind: "command_not_found",
      evidence: "exit code 127",
    });
  });

  it("shows the repository's output as plain, short text (no terminal escapes, no control characters)", () => {
    const hostile = `bash: line 1: \u001b]0;pwned\u0007\u001b[31mtool${"x".repeat(300)}: command not found`;
    const found = classify(hostile, 127);
    expect(found?.evidence).not.toMatch(/\p{Cc}/u);
    expect(found?.evidence.length).toBeLessThanOrEqual(160);
  });
});
