import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { quoteShellArg, shellCommand } from "./shell-quote.js";

/** What bash actually passes to a program, one argument per NUL-terminated record. */
function bashArgv(commandLine: string): string[] {
  const out = execFileSync("bash", ["-c", `printf '%s\\0' ${commandLine}`], { encoding: "utf8" });
  return out.split("\0").slice(0, -1);
}

const hostile = [
  "plain",
  "with space",
  "  leading and trailing  ",
  "it's",
  "'",
  "''",
  '"double"',
  "back`tick`",
  "$(rm -rf /)",
  "${HOME}",
  "$HOME",
  "a\nb",
  "\n",
  "tab\there",
  "-rf",
  "--",
  "-",
  "*",
  "?",
  "[abc]",
  "{a,b}",
  "~",
  "~root",
  "a;b",
  "a|b",
  "a&b",
  "a>b",
  "<x",
  "!bang",
  "#comment",
  "back\\slash",
  "ünïcødé ✓ 日本語",
  "emoji 🦀",
  "\u200b",
  "\r\n",
  "=value",
  "",
];

describe("quoteShellArg", () => {
  it.each(hostile)("round-trips %j through bash unchanged", (value) => {
    expect(bashArgv(quoteShellArg(value))).toEqual([value]);
  });

  it("keeps every argument one word in a joined command line", () => {
    expect(bashArgv(shellCommand(hostile))).toEqual(hostile);
  });

  it("leaves safe words readable", () => {
    expect(quoteShellArg("src/tools/index.ts")).toBe("src/tools/index.ts");
    expect(quoteShellArg("--glob=*.ts")).toBe("'--glob=*.ts'");
  });

  it("quotes the empty string as an empty word, not nothing", () => {
    expect(quoteShellArg("")).toBe("''");
    expect(bashArgv(shellCommand(["a", "", "b"]))).toEqual(["a", "", "b"]);
  });

  it("refuses NUL, which no argument can carry", () => {
    expect(() => quoteShellArg("a\u0000b")).toThrow(/NUL/);
  });

  it("does not let a quoted argument run a command", () => {
    const out = execFileSync("bash", ["-c", `echo ${quoteShellArg("x'; echo PWNED; '")}`], {
      encoding: "utf8",
    });
    expect(out).toBe("x'; echo PWNED; '\n");
  });
});

describe("shellCommand", () => {
  it("quotes a leading NAME=value so it is a command word, never an assignment", () => {
    const out = execFileSync("bash", ["-c", `${shellCommand(["FOO=bar"])} 2>&1 || true`], {
      encoding: "utf8",
    });
    expect(out).toMatch(/FOO=bar: command not found/);
  });
});
