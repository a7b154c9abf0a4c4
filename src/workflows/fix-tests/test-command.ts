import { constants } from "node:fs";
import { open, readdir } from "node:fs/promises";
import path from "node:path";

/** A test command found in a repository's own files, and where it was found. */
export interface FoundTestCommand {
  command: string;
  /** For the user: which file said so ("package.json's scripts.test"). */
  source: string;
}

/**
 * The command that runs a repository's tests, as its own files declare it, for `fix-tests`
 * without `--test-cmd`. The project's own entry point comes first (a Makefile's `test` or
 * `check` target), then each ecosystem's convention. These are the user's files, read before any
 * agent ran (nothing is run, and a link is not followed); undefined when none says.
 */
export async function findTestCommand(repository: string): Promise<FoundTestCommand | undefined> {
  for (const probe of probes) {
    const found = await probe(repository);
    if (found) return found;
  }
  return undefined;
}

/** What `findTestCommand` looks for, in the words of an error that found none. */
export const testCommandSources =
  "a Makefile test or check target, package.json's scripts.test, go.mod, Cargo.toml, pytest's configuration or test_*.py files, CMake tests (add_test), or .bats files";

type Probe = (repository: string) => Promise<FoundTestCommand | undefined>;

const makeTarget: Probe = async (repository) => {
  for (const name of ["GNUmakefile", "makefile", "Makefile"]) {
    const text = await readSmallFile(path.join(repository, name));
    if (text === undefined) continue;
    for (const target of ["test", "check"]) {
      if (new RegExp(`^${target}\\s*:(?!=)`, "m").test(text)) {
        return { command: `make ${target}`, source: `the ${name}'s ${target} target` };
      }
    }
  }
  return undefined;
};

/** npm's `npm init` placeholder, which fails on purpose. */
const npmPlaceholder = /no test specified/;

const packageScript: Probe = async (repository) => {
  const text = await readSmallFile(path.join(repository, "package.json"));
  if (text === undefined) return undefined;
  let script: unknown;
  try {
    script = (JSON.parse(text) as { scripts?: { test?: unknown } }).scripts?.test;
  } catch {
    return undefined;
  }
  if (typeof script !== "string" || script.trim() === "" || npmPlaceholder.test(script)) {
    return undefined;
  }
  const manager = (await exists(repository, "pnpm-lock.yaml"))
    ? "pnpm"
    : (await exists(repository, "yarn.lock"))
      ? "yarn"
      : "npm";
  return { command: `${manager} test`, source: "package.json's scripts.test" };
};

const marker =
  (file: string, command: string): Probe =>
  async (repository) =>
    (await exists(repository, file)) ? { command, source: file } : undefined;

const pytest: Probe = async (repository) => {
  const configured: [string, RegExp][] = [
    ["pytest.ini", /^\s*\[pytest\]/m],
    ["pyproject.toml", /^\s*\[tool\.pytest/m],
    ["setup.cfg", /^\s*\[tool:pytest\]/m],
    ["tox.ini", /^\s*\[pytest\]/m],
  ];
  for (const [file, section] of configured) {
    const text = await readSmallFile(path.join(repository, file));
    if (text !== undefined && section.test(text)) {
      return { command: "python3 -m pytest", source: `pytest's configuration in ${file}` };
    }
  }
  // pytest also runs unittest's test cases: files named as either finds them.
  for (const directory of [".", "tests", "test"]) {
    const names = await namesIn(path.join(repository, directory));
    if (names.some((name) => /^test_.*\.py$|_test\.py$/.test(name))) {
      return {
        command: "python3 -m pytest",
        source: `test_*.py files in ${directory === "." ? "the repository" : `${directory}/`}`,
      };
    }
  }
  return undefined;
};

const cmakeTests: Probe = async (repository) => {
  const text = await readSmallFile(path.join(repository, "CMakeLists.txt"));
  if (text === undefined || !/\b(?:enable_testing|add_test)\s*\(/i.test(text)) {
    return undefined;
  }
  return {
    command:
      "cmake -S . -B build && cmake --build build && ctest --test-dir build --output-on-failure",
    source: "CMakeLists.txt",
  };
};

const batsFiles: Probe = async (repository) => {
  for (const directory of ["test", "tests"]) {
    const names = await namesIn(path.join(repository, directory));
    if (names.some((name) => name.endsWith(".bats"))) {
      return { command: `bats ${directory}`, source: `.bats files in ${directory}/` };
    }
  }
  return undefined;
};

const probes: Probe[] = [
  makeTarget,
  packageScript,
  marker("go.mod", "go test ./..."),
  marker("Cargo.toml", "cargo test"),
  pytest,
  cmakeTests,
  batsFiles,
];

/** Files larger than this are not a build file anyone writes by hand. */
const maxBytes = 1 << 20;

/** A regular file's text, not through a link; undefined when there is none (or too big). */
async function readSmallFile(file: string): Promise<string | undefined> {
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile() || stats.size > maxBytes) return undefined;
    return await handle.readFile("utf8");
  } finally {
    await handle.close();
  }
}

async function exists(repository: string, name: string): Promise<boolean> {
  return (await namesIn(repository)).includes(name);
}

/** The names in a directory; none when it cannot be listed. */
async function namesIn(directory: string): Promise<string[]> {
  return readdir(directory).catch(() => [] as string[]);
}
