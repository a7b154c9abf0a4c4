/**
 * The lines of a test run that are the runner's and the shell's own words, for telling the
 * environment from the code. A test framework's failure report quotes the code under test and
 * its expectations — expected/actual blocks, diffs, `assert … ==`, captured output, bats' and
 * TAP's `# ` diagnostics — so a test whose expected output is "rbenv: rspec: command not found"
 * prints that line without anything being missing. Those lines are never evidence.
 *
 * What is left: unindented lines outside the reports (shells, make, npm, a runtime's uncaught
 * error, go's and cargo's own errors), and, inside Python reports, the line naming the exception
 * that was raised (`E   ModuleNotFoundError: No module named 'yaml'`), which is the interpreter's.
 */

/** A report region: where it starts, and where it ends (the ending line is outside it). */
interface Region {
  name: string;
  starts(line: string, previous: string | undefined): boolean;
  ends(line: string): boolean;
  /** Lines inside that are still the runtime's own words. */
  keeps?(line: string): boolean;
}

/** pytest's and unittest's section rules: `____ test_x ____`, `==== ERRORS ====`, `---- … ----`. */
const pytestSectionHeader = /^(?:_{3,}|={3,}|-{3,}) .* (?:_{3,}|={3,}|-{3,})$/;
const unittestRule = /^(?:={20,}|-{20,})$/;

/**
 * The line a Python report ends with: the exception raised (not an assertion's), as pytest
 * (`E   `) or a traceback prints it.
 */
function isRaisedException(line: string): boolean {
  const exception = /^(?:E\s+)?((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)): /.exec(line);
  return exception !== null && !/AssertionError$/.test(exception[1] ?? "");
}

const regions: readonly Region[] = [
  {
    // pytest's FAILURES and ERRORS sections, up to the short summary or the final line.
    name: "pytest report",
    starts: (line) => /^=+ (?:FAILURES|ERRORS) =+$/.test(line),
    ends: (line) => /^=+ (?!FAILURES|ERRORS).* =+$/.test(line),
    keeps: isRaisedException,
  },
  {
    // pytest's captured output of a test (inside or outside the report sections).
    name: "pytest captured output",
    starts: (line) => /^-+ Captured (?:stdout|stderr|log) (?:setup|call|teardown) -+$/.test(line),
    ends: (line) => pytestSectionHeader.test(line) && !/ Captured /.test(line),
  },
  {
    // unittest: `FAIL: test_x (…)` / `ERROR: …`, a traceback, the exception, a diff.
    name: "unittest report",
    starts: (line, previous) =>
      /^(?:FAIL|ERROR): \S/.test(line) && unittestRule.test(previous ?? ""),
    ends: (line) => /^Ran \d+ tests? in /.test(line) || /^={20,}$/.test(line),
    keeps: isRaisedException,
  },
  {
    // cargo: `---- tests::adds stdout ----`, the panic and its left/right values.
    name: "cargo test output",
    starts: (line) => /^---- \S+ stdout ----$/.test(line),
    ends: (line) =>
      /^(?:failures:|test result: )/.test(line) || /^---- \S+ stdout ----$/.test(line),
  },
  {
    // TAP's YAML diagnostics after a test point (node:test), between `  ---` and `  ...`.
    name: "TAP diagnostics",
    starts: (line, previous) => /^\s+---$/.test(line) && /^\s*(?:not )?ok\b/.test(previous ?? ""),
    ends: (line) => /^\s+\.\.\.$/.test(line),
  },
];

/**
 * A line of its own that is not a report's: not a TAP/bats diagnostic (`# …`), not a test's name, and not indented
 * (go test's `t.Log` lines, jest's and mocha's expected/received blocks, bats' pretty report),
 * except cargo's own indented error chain (`Caused by:` then `  Permission denied (os error 13)`).
 */
function isOwnLine(line: string, previous: string | undefined): boolean {
  if (/^#/.test(line)) return false;
  // A test's name is its author's words: TAP's `not ok 2 - reports a read-only file system`,
  // go's `--- FAIL: TestPermissionDenied`.
  if (/^(?:not )?ok\b|^--- (?:FAIL|PASS|SKIP): /.test(line)) return false;
  // pytest's short summary repeats each report's message: `FAILED test_x.py::test_y - assert …`.
  if (/^(?:FAILED|ERROR|XPASS|XFAIL) \S+ - /.test(line)) return false;
  if (!/^\s/.test(line)) return true;
  return previous === "Caused by:" && /^ {2}\S/.test(line);
}

/**
 * The runner's own lines of `lines` (already cleaned of terminal escapes), in order. Both sides
 * are hostile text: this only decides which lines may be read as evidence, never what they mean.
 */
export function runnerOwnLines(lines: readonly string[]): string[] {
  const own: string[] = [];
  let inside: Region | undefined;
  let previous: string | undefined;
  for (const line of lines) {
    if (inside?.ends(line)) inside = undefined;
    if (inside === undefined) {
      inside = regions.find((region) => region.starts(line, previous));
      if (inside === undefined && isOwnLine(line, previous)) own.push(line);
    } else if (inside.keeps?.(line)) {
      own.push(line);
    }
    if (line.trim() !== "") previous = line;
  }
  return own;
}
