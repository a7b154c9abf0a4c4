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
      "`cc` is not installed",
    ],
    [
      "valgrind --error-exitcode=1 ./textbuf_test 2>&1 | tee log\n/bin/sh: 1: valgrind: not found\nmake: *** [Makefile:20: memcheck] Error 127",
      2,
      "`valgrind` is not installed",
    ],
    ["make: *** [Makefile:20: memcheck] Error 127", 2, "a command the Makefile runs"],
    // busybox ash (alpine images), zsh, a bash script, and a script whose interpreter is missing.
    ["sh: pytest: not found", 127, "`pytest` is not installed"],
    ["zsh:1: command not found: bats", 127, "`bats` is not installed"],
    ["./scripts/test.sh: line 4: shellcheck: command not found", 1, "`shellcheck`"],
    ["/usr/bin/env: 'python': No such file or directory", 127, "`python` is not installed"],
    ["env: can't execute 'python3': No such file or directory", 127, "`python3`"],
  ])("a missing command: %j", (output, exitCode, problem) => {
    const found = classify(output, exitCode);
    expect(found?.kind).toBe("command_not_found");
    expect(found?.problem).toContain(problem);
    const tool = /`(valgrind|bats|shellcheck)`/.exec(problem)?.[1];
    if (tool === undefined) {
      expect(found?.fix).toMatch(/--carry node_modules.*--setup-cmd.*sandbox\.docker\.image/);
    } else {
      // A system tool Debian packages: its image recipe, not the dependencies' fixes.
      expect(found?.fix).toContain(`apt-get install -y --no-install-recommends ${tool}`);
      expect(found?.fix).not.toMatch(/--carry|--setup-cmd/);
    }
  });

  it.each([
    ["bash: line 1: cargo: command not found", ["Cargo.toml", "src"], "cargo"],
    ["bash: line 1: go: command not found", ["go.mod", "calc"], "golang-go"],
    ["make: ctest: No such file or directory", ["CMakeLists.txt"], "cmake"],
    ["sh: 1: mvn: not found", ["pom.xml", "src"], "maven"],
    ["bash: line 1: bundle: command not found", ["Gemfile", "spec"], "ruby-bundler"],
  ])(
    "a toolchain the image lacks gets the project image that adds it: %j",
    (output, names, debian) => {
      const found = classifyEnvironmentError({
        exitCode: 127,
        output,
        network: "none",
        projectNames: new Set(names),
      });
      expect(found?.kind).toBe("command_not_found");
      expect(found?.fix).toContain("is a system tool");
      expect(found?.fix).toContain(
        `\`RUN apt-get update && apt-get install -y --no-install-recommends ${debian}\``,
      );
      expect(found?.fix).toContain('sandbox.docker.dockerfile: ".cordon/Dockerfile"');
      // Telling a Rust or Go user to carry node_modules sends them the wrong way.
      expect(found?.fix).not.toMatch(/node_modules|pip install|npm ci/);
    },
  );

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

  it("environment patterns match whatever the case (go prints a lower-case permission denied)", () => {
    expect(classify("touch: cannot touch 'x': READ-ONLY FILE SYSTEM")?.kind).toBe(
      "read_only_file_system",
    );
    expect(classify("open /workspace/data.db: permission denied")?.kind).toBe("permission_denied");
    expect(classify("curl: (6) could not resolve host: example.com")?.kind).toBe("no_network");
  });

  it("go test that cannot run the binary it built under $TMPDIR: the program and the tmpfs fix", () => {
    // go 1.19, `go test ./...` with /tmp mounted noexec.
    const output = [
      "fork/exec /tmp/go-build2730712386/b001/calc.test: permission denied",
      "FAIL\texample.com/calc\t0.001s",
      "ok  \texample.com/calc/internal/parse\t(cached)",
      "FAIL",
    ].join("\n");
    const found = classify(output);
    expect(found).toMatchObject({
      kind: "permission_denied",
      evidence: "fork/exec /tmp/go-build2730712386/b001/calc.test: permission denied",
    });
    expect(found?.problem).toContain("refused to run `/tmp/go-build2730712386/b001/calc.test`");
    expect(found?.fix).toMatch(/exec.*sandbox\.docker\.tmpfs.*GOTMPDIR/);
  });

  it("cargo and busybox refusing to run a program say which fix applies", () => {
    const cargo = [
      "    Finished test [unoptimized + debuginfo] target(s) in 0.41s",
      "     Running unittests src/lib.rs (target/debug/deps/calc-5c8a7a1e0e4c0b4f)",
      "error: test failed, to rerun pass `--lib`",
      "",
      "Caused by:",
      "  could not execute process `/workspace/target/debug/deps/calc-5c8a7a1e0e4c0b4f` (never executed)",
      "",
      "Caused by:",
      "  Permission denied (os error 13)",
    ].join("\n");
    expect(classify(cargo, 101)).toMatchObject({
      kind: "permission_denied",
      problem: "cargo could not run a test binary (permission denied)",
    });
    expect(classify(cargo, 101)?.fix).toMatch(/tmpfs/);
    expect(classify("sh: ./run-tests.sh: Permission denied", 126)?.problem).toContain(
      "`./run-tests.sh`",
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

/**
 * Failure reports that quote what a missing tool or a denied file would print: expected output,
 * not evidence. Each is written as the runner prints it (pytest 7, bats 1.8, go 1.19, jest 29,
 * mocha 10, node 20's node:test, python 3.11's unittest).
 */
describe("only the runner's own words are evidence", () => {
  it("bats: the field case, rbenv's expected message in a failing test's TAP diagnostics", () => {
    const bats = [
      "1..3",
      "ok 1 rbenv shims rspec",
      "not ok 2 rbenv prints a clear message for a missing command",
      "# (in test file test/exec.bats, line 14)",
      '#   `assert_failure "rbenv: rspec: command not found"\' failed',
      "#",
      "# -- output differs --",
      "# expected : rbenv: rspec: command not found",
      "# actual   : rbenv: rspec: not installed",
      "# --",
      "#",
      "ok 3 rbenv exec passes arguments",
    ].join("\n");
    expect(classify(bats, 1)).toBeUndefined();
  });

  it("pytest: assertion diffs, the short summary and captured output", () => {
    const pytest = [
      "============================= test session starts ==============================",
      "platform linux -- Python 3.11.2, pytest-7.2.1, pluggy-1.0.0+repack",
      "rootdir: /workspace",
      "collected 2 items",
      "",
      "test_shim.py .F                                                          [100%]",
      "",
      "=================================== FAILURES ===================================",
      "_____________________________ test_missing_command _____________________________",
      "",
      "    def test_missing_command():",
      '        result = run_shim("rspec")',
      '>       assert result.stderr == "bash: rspec: command not found\\n"',
      "E       AssertionError: assert 'rbenv: rspec: command not found\\n' == 'bash: rspec: command not found\\n'",
      "E         - bash: rspec: command not found",
      "E         ? ^^^^",
      "E         + rbenv: rspec: command not found",
      "E         ? ^^^^^",
      "",
      "test_shim.py:9: AssertionError",
      "----------------------------- Captured stderr call -----------------------------",
      "sh: 1: rspec: not found",
      "bash: ./fixtures/locked.sh: Permission denied",
      "=========================== short test summary info ============================",
      "FAILED test_shim.py::test_missing_command - AssertionError: assert 'rbenv: rspec: command not found\\n' == 'bash: rspec: command not found\\n'",
      "========================= 1 failed, 1 passed in 0.03s ==========================",
    ].join("\n");
    expect(classify(pytest)).toBeUndefined();
  });

  it("pytest: an exception the test raised is the interpreter's word, inside the report too", () => {
    const pytest = [
      "=================================== FAILURES ===================================",
      "________________________________ test_load_yaml ________________________________",
      "",
      "    def test_load_yaml():",
      ">       import yaml",
      "E       ModuleNotFoundError: No module named 'yaml'",
      "",
      "test_rates.py:4: ModuleNotFoundError",
      "=========================== short test summary info ============================",
      "FAILED test_rates.py::test_load_yaml - ModuleNotFoundError: No module named 'yaml'",
      "============================== 1 failed in 0.02s ===============================",
    ].join("\n");
    expect(classify(pytest)).toMatchObject({
      kind: "module_not_found",
      evidence: "E       ModuleNotFoundError: No module named 'yaml'",
    });
  });

  it("go test: a test's own log lines under --- FAIL", () => {
    const go = [
      "--- FAIL: TestOpenReadOnly (0.00s)",
      '    store_test.go:21: Open() error = "open /data/db: permission denied", want nil',
      '    store_test.go:27: Run() = "sh: 1: sqlite3: not found", want ""',
      "FAIL",
      "FAIL\texample.com/store\t0.002s",
      "FAIL",
    ].join("\n");
    expect(classify(go)).toBeUndefined();
  });

  it("jest and mocha: expected/received blocks", () => {
    const jest = [
      "FAIL test/shim.test.js",
      "  ● shim › reports a denied file",
      "",
      "    expect(received).toBe(expected) // Object.is equality",
      "",
      `    Expected: "Error: EACCES: permission denied, open '/etc/shadow'"`,
      '    Received: "ok"',
      "",
      "Tests:       1 failed, 3 passed, 4 total",
    ].join("\n");
    expect(classify(jest)).toBeUndefined();
    const mocha = [
      "  1) shim",
      "       reports a missing command:",
      "",
      "      AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:",
      "+ actual - expected",
      "",
      "+ 'sh: 1: rspec: not found'",
      "- 'rbenv: rspec: command not found'",
    ].join("\n");
    expect(classify(mocha)).toBeUndefined();
  });

  it("node:test: TAP's YAML diagnostics of a failing test", () => {
    const tap = [
      "TAP version 13",
      "# Subtest: reports a read-only file system",
      "not ok 1 - reports a read-only file system",
      "  ---",
      "  duration_ms: 1.2",
      "  failureType: 'testCodeFailure'",
      "  error: |-",
      "    Expected values to be strictly equal:",
      "    ",
      "    'EROFS: read-only file system, open \\'/x\\'' !== ''",
      "    ",
      "  code: 'ERR_ASSERTION'",
      "  ...",
      "1..1",
      "# tests 1",
      "# fail 1",
    ].join("\n");
    expect(classify(tap)).toBeUndefined();
  });

  it("unittest: the diff is the test's, the raised exception is the interpreter's", () => {
    const diff = [
      "F.",
      "======================================================================",
      "FAIL: test_message (test_shim.ShimTest.test_message)",
      "----------------------------------------------------------------------",
      "Traceback (most recent call last):",
      '  File "/workspace/test_shim.py", line 9, in test_message',
      '    self.assertEqual(run("rspec"), "rbenv: rspec: command not found")',
      "AssertionError: 'bash: rspec: command not found' != 'rbenv: rspec: command not found'",
      "- bash: rspec: command not found",
      "? ^^^^",
      "+ rbenv: rspec: command not found",
      "? ^^^^^",
      "",
      "",
      "----------------------------------------------------------------------",
      "Ran 2 tests in 0.004s",
      "",
      "FAILED (failures=1)",
    ].join("\n");
    expect(classify(diff)).toBeUndefined();
    const missing = [
      "E",
      "======================================================================",
      "ERROR: test_rates (unittest.loader._FailedTest.test_rates)",
      "----------------------------------------------------------------------",
      "ImportError: Failed to import test module: test_rates",
      "Traceback (most recent call last):",
      '  File "/usr/lib/python3.11/unittest/loader.py", line 407, in _find_test_path',
      "    module = self._get_module_from_name(name)",
      '  File "/workspace/test_rates.py", line 1, in <module>',
      "    import yaml",
      "ModuleNotFoundError: No module named 'yaml'",
      "",
      "",
      "----------------------------------------------------------------------",
      "Ran 1 test in 0.000s",
      "",
      "FAILED (errors=1)",
    ].join("\n");
    expect(classify(missing)?.problem).toBe(
      "the Python module `yaml` is not installed in the sandbox",
    );
  });

  it("a program's own message that merely looks like a shell's is not a missing command", () => {
    expect(classify("rbenv: rspec: command not found", 1)).toBeUndefined();
    expect(classify("    bash: rspec: command not found", 1)).toBeUndefined();
  });
});
