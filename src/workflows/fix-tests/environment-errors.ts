import { stripVTControlCharacters } from "node:util";

import { dependencyFix } from "./dependency-fix.js";
import { runnerOwnLines } from "./runner-words.js";
import { debianPackageOf, imageThatHas, projectImageRecipe } from "./system-tools.js";

/**
 * Why a failing test run says nothing about the code: the sandbox lacks what the tests need.
 * Handing such a run to the agent costs model turns and ends as "verification failed", telling
 * the user their code is wrong when it is the environment.
 */
export type EnvironmentErrorKind =
  | "command_not_found"
  | "missing_script"
  | "module_not_found"
  | "no_network"
  | "read_only_file_system"
  | "permission_denied";

export interface EnvironmentError {
  kind: EnvironmentErrorKind;
  /** The output line that shows it, cleaned of control characters and cut to a readable length. */
  evidence: string;
  /** One sentence: what is missing. */
  problem: string;
  /** What the user can do: carry, a setup command, an image, egress. */
  fix: string;
}

export interface ClassifyInput {
  exitCode: number | null;
  /** The test run's output (stdout and stderr interleaved). Written by the repository: data only. */
  output: string;
  /** Whether the sandbox can reach anything beyond loopback. */
  network: "none" | "some";
  /**
   * Top-level names of the workspace's files and of its `src/` (`calc`, `calc.py`, `lib`): a
   * module missing under one of these is the project's own code, which the agent may fix.
   */
  projectNames: ReadonlySet<string>;
}

const evidenceWidth = 160;

/**
 * A missing command: a known system tool needs an image that has it; anything else the project's
 * dependencies may bring, or the image must have.
 */
function commandFix(projectNames: ReadonlySet<string>, command?: string): string {
  const debian = command === undefined ? undefined : debianPackageOf(command);
  if (debian !== undefined) {
    return `\`${command}\` is a system tool, not one of the project's dependencies: ${projectImageRecipe([debian])}`;
  }
  return `if the command comes with the project's dependencies, ${dependencyFix({ projectNames })}; if it is a system tool, ${imageThatHas("it")}`;
}

/** What one line shows: the problem sentence, and a fix when it is more precise than the rule's. */
interface Finding {
  problem: string;
  fix?: string;
}

interface Rule {
  kind: EnvironmentErrorKind;
  /** Matches one of the runner's own lines (runner-words.ts); returns what it shows, or undefined. */
  match(line: string, input: ClassifyInput): Finding | string | undefined;
  fix: string;
}

/** The first capture of `pattern` in `line`. */
function capture(pattern: RegExp, line: string): string | undefined {
  return pattern.exec(line)?.[1];
}

/** A module specifier that names a package (not a path into the project). */
function packageName(specifier: string): string | undefined {
  if (specifier.startsWith(".") || specifier.startsWith("/") || specifier.startsWith("file:")) {
    return undefined;
  }
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

function isProjectModule(name: string, projectNames: ReadonlySet<string>): boolean {
  const top = name.split(/[./]/)[0] ?? name;
  return [top, `${top}.py`, `${top}.js`, `${top}.mjs`, `${top}.ts`, name].some((candidate) =>
    projectNames.has(candidate),
  );
}

/**
 * A shell saying it found no such command, as the shell prints it at the start of a line (never
 * another program's message, which a test may expect: rbenv's "rbenv: rspec: command not found").
 */
const notFoundPatterns: readonly RegExp[] = [
  // bash: "bash: pytest: command not found", "bash: line 1: pytest: command not found";
  // dash (npm scripts): "sh: 1: mocha: not found"; busybox ash: "sh: pytest: not found".
  /^(?:\S*\/)?(?:ba|da|k|mk|a)?sh: (?:line \d+: |\d+: )?([^\s:]+): (?:command )?not found$/i,
  // A script run by bash ("./run.sh: line 3: pytest: command not found") or dash ("./run.sh: 3: …").
  /^\S+: (?:line \d+|\d+): ([^\s:]+): (?:command )?not found$/i,
  // zsh: "zsh:1: command not found: pytest".
  /^(?:\S*\/)?zsh:(?:\d+:)? command not found: (\S+)$/i,
  // A script whose interpreter is missing: "/usr/bin/env: 'python': No such file or directory"
  // (coreutils), "env: can't execute 'python': No such file or directory" (busybox).
  /^(?:\S*\/)?env: (?:can't execute )?['‘]([^'’\s]+)['’]: No such file or directory$/i,
  // GNU make running a command line without a shell: "make: pytest: No such file or directory".
  /^make(?:\[\d+\])?: ([^\s:/*]+): No such file or directory$/i,
];

/** A program the kernel refused to run, as the toolchain that started it says so. */
const deniedRunPatterns: readonly RegExp[] = [
  // go test runs the test binary it built under $TMPDIR: "fork/exec /tmp/go-build…/calc.test: permission denied".
  /^fork\/exec (\S+): permission denied$/i,
  // bash ("bash: line 1: ./run.sh: Permission denied"), dash ("sh: 1: ./run.sh: …"), busybox ("sh: ./run.sh: …").
  /^(?:\S*\/)?(?:ba|da|k|mk|a)?sh: (?:line \d+: |\d+: )?(\S+): permission denied$/i,
  /^\S+: (?:line \d+|\d+): (\S+): permission denied$/i,
  // GNU make: "make: ./run.sh: Permission denied", "make: execvp: ./run.sh: Permission denied".
  /^make(?:\[\d+\])?: (?:execvp: )?(\S+): permission denied$/i,
];

const deniedRunFix =
  "if the program is under /tmp or /var/tmp (go test builds its test binaries there, bats and pytest put scripts there), that tmpfs is mounted without exec: say `exec` in its sandbox.docker.tmpfs options (cordon's defaults do), or point TMPDIR (GOTMPDIR for Go) into the workspace; if it is a file of the repository, commit it executable (`git update-index --chmod=+x FILE`)";

const rules: readonly Rule[] = [
  {
    kind: "command_not_found",
    match: (line, input) => {
      const command = notFoundPatterns.map((pattern) => capture(pattern, line)).find(Boolean);
      if (command) {
        return {
          problem: `\`${command}\` is not installed in the sandbox`,
          fix: commandFix(input.projectNames, command),
        };
      }
      const fix = commandFix(input.projectNames);
      // GNU make running a tool that is not there.
      if (/^make(?:\[\d+\])?: \*\*\* .*Error 127$/.test(line)) {
        return { problem: "a command the Makefile runs is not installed in the sandbox", fix };
      }
      return undefined;
    },
    fix: commandFix(new Set()),
  },
  {
    kind: "missing_script",
    match: (line) => {
      const script = capture(/^npm (?:ERR!|error) Missing script: "?([^"\s]+)"?/, line);
      return script ? `package.json has no "${script}" script` : undefined;
    },
    fix: "check --test-cmd against the scripts in package.json",
  },
  {
    kind: "module_not_found",
    match: (line, input) => {
      const python = capture(/ModuleNotFoundError: No module named '([^']+)'/, line);
      const { projectNames } = input;
      if (python && !isProjectModule(python, projectNames)) {
        return {
          problem: `the Python module \`${python}\` is not installed in the sandbox`,
          fix: dependencyFix({ projectNames, ecosystem: "python", module: python }),
        };
      }
      const node =
        capture(/Error: Cannot find module '([^']+)'/, line) ??
        capture(/\[ERR_MODULE_NOT_FOUND\]: Cannot find package '([^']+)'/, line);
      const name = node === undefined ? undefined : packageName(node);
      if (name && !isProjectModule(name, projectNames)) {
        return {
          problem: `the package \`${name}\` is not installed in the sandbox`,
          fix: dependencyFix({ projectNames, ecosystem: "node" }),
        };
      }
      return undefined;
    },
    fix: dependencyFix({ projectNames: new Set() }),
  },
  {
    kind: "no_network",
    match: (line, input) => {
      if (input.network !== "none") return undefined;
      const found = capture(
        /\b(EAI_AGAIN|ENOTFOUND|ENETUNREACH|ENOTCACHED|Temporary failure in name resolution|Could not resolve host|Name or service not known|Network is unreachable|No matching distribution found)\b/i,
        line,
      );
      // Go's own resolver reads no resolv.conf and asks [::1]:53, which refuses: "dial tcp: lookup proxy.golang.org on [::1]:53: … connection refused".
      const goLookup = capture(/\bdial tcp: lookup (\S+?)(?: on \S+)?: /, line);
      const signal = found ?? (goLookup ? `lookup ${goLookup}` : undefined);
      if (!signal) return undefined;
      const problem = `the tests tried to reach the network (${signal}), and this sandbox has none`;
      // go fetching a module it does not have: `go: example.com/x@v1.2.0: Get "https://proxy.golang.org/…": dial tcp: lookup …`.
      return /^go: |proxy\.golang\.org/.test(line)
        ? { problem, fix: dependencyFix({ projectNames: input.projectNames, ecosystem: "go" }) }
        : problem;
    },
    fix: "install what the tests download before they run (`--setup-cmd` with `--setup-allow-host HOST`), carry it in (`--carry`), or let the run reach the host it needs (`--allow-host HOST`, sandbox.egress.allow)",
  },
  {
    kind: "read_only_file_system",
    match: (line) =>
      /\bEROFS\b|read-only file system/i.test(line)
        ? "the tests write where the sandbox is read-only"
        : undefined,
    fix: "the sandbox's root filesystem and read-only mounts cannot be written: write under /workspace, /tmp or HOME; a carried directory (`--carry`) is writable; or set sandbox.docker.readOnlyRoot: false",
  },
  {
    kind: "permission_denied",
    match: (line) => {
      const program = deniedRunPatterns.map((pattern) => capture(pattern, line)).find(Boolean);
      if (program) {
        return {
          problem: `the sandbox refused to run \`${program}\` (permission denied)`,
          fix: deniedRunFix,
        };
      }
      if (/^ {2}Permission denied \(os error 13\)$/i.test(line)) {
        return {
          problem: "cargo could not run a test binary (permission denied)",
          fix: deniedRunFix,
        };
      }
      return /\bEACCES\b|permission denied/i.test(line)
        ? "the tests were denied access to a file as the sandbox user"
        : undefined;
    },
    fix: "the sandbox runs as a non-root user with no capabilities: commit the file with the mode it needs (e.g. executable), or use an image that gives the sandbox user access (sandbox.docker.image)",
  },
];

/** A line as a terminal would show it, with no escapes or control characters; indentation kept. */
function plainLine(line: string): string {
  return stripVTControlCharacters(line.replace(/^.*\r(?!$)/, ""))
    .replace(/[\p{Cc}\p{Cf}]/gu, " ")
    .trimEnd();
}

function evidenceOf(line: string): string {
  const clean = line.trim();
  return clean.length > evidenceWidth ? `${clean.slice(0, evidenceWidth - 1)}…` : clean;
}

/**
 * Why a failed test run is the environment's fault, from its output, or undefined when it looks
 * like a real test failure for the agent to fix. Only the runner's own lines are read
 * (runner-words.ts): what a failing test's report quotes is the test's business. Rules are tried
 * in order (a missing command explains everything after it), each over every line.
 */
export function classifyEnvironmentError(input: ClassifyInput): EnvironmentError | undefined {
  if (input.exitCode === 0) return undefined;
  const lines = runnerOwnLines(input.output.split("\n").map(plainLine));
  for (const rule of rules) {
    for (const line of lines) {
      const found = rule.match(line, input);
      if (found === undefined) continue;
      const { problem, fix = rule.fix } = typeof found === "string" ? { problem: found } : found;
      return { kind: rule.kind, evidence: evidenceOf(line), problem, fix };
    }
  }
  if (input.exitCode === 127) {
    // The test command's own shell found no such command, though it said nothing cordon reads.
    return {
      kind: "command_not_found",
      evidence: "exit code 127",
      problem: "the test command was not found in the sandbox",
      fix: commandFix(input.projectNames),
    };
  }
  return undefined;
}

/** The top-level names `projectNames` wants, from `git ls-files` output. */
export function projectNamesOf(files: string): Set<string> {
  const names = new Set<string>();
  for (const file of files.split("\n")) {
    const parts = file.split("/");
    if (parts[0]) names.add(parts[0]);
    if (parts[0] === "src" && parts[1]) names.add(parts[1]);
  }
  return names;
}
