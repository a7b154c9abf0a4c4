/**
 * The test harness: files that decide what the test command runs and what counts as passing,
 * without being tests themselves. An agent that rewrites the Makefile's `test:` target, points
 * `npm test` at `exit 0` or drops a `unittest.py` into the root has made the check pass, not the
 * code. These rules judge a path (and, for new Python modules, that it is new); the files whose
 * harness is only a part of them (package.json `scripts`, setup.cfg and pyproject.toml sections)
 * are judged by content in harness-content.ts.
 */
import { minimatch } from "minimatch";

import type { PatchedFile } from "../../changes/index.js";
import { shadowingModuleNames } from "./harness-python-names.js";

/** Whole files that configure a build tool, package manager, test runner or the interpreter. */
const harnessFileNames = [
  // make, and the task runners that play its part.
  /^(GNUmakefile|[Mm]akefile|.*\.mk|[Jj]ustfile|\.justfile|Rakefile)$/,
  // CMake and CTest: which targets and tests exist (`enable_testing`, `add_test`, an option that
  // turns the tests off and leaves ctest passing with "No tests were found"), and their presets.
  /^(CMakeLists\.txt|.*\.cmake|CMake(User)?Presets\.json)$/,
  // npm, yarn and pnpm: which registry, which scripts shell, which yarn runs, how modules resolve.
  /^(\.npmrc|\.yarnrc(\.ya?ml)?|\.pnpmfile\.cjs|\.pnp\.c?js|\.pnp\.loader\.mjs)$/,
  // pytest, tox, nox, coverage; conftest.py holds pytest hooks that can deselect every test.
  /^(\.?pytest\.ini|tox\.ini|noxfile\.py|\.coveragerc|conftest\.py)$/,
  // Run by the interpreter at startup, before any test.
  /^(sitecustomize\.py|usercustomize\.py|.*\.pth)$/,
  // JavaScript test runners and the transforms they put tests through.
  /^(jest|vitest|vite|playwright|cypress|ava|babel)\.(config|workspace)\.([cm]?[jt]sx?|json)$/,
  /^karma\.conf\.[cm]?[jt]s$/,
  /^\.(mocharc|babelrc|nycrc|c8rc|taprc)(\.(c?js|json5?|jsonc|ya?ml))?$/,
  /^\.rspec$/,
];

/** Directories whose files do the same: yarn's own release and plugins, cargo's `runner`. */
const harnessDirectories = /(^|\/)(\.yarn\/(releases|plugins)|\.cargo)\//;

/** A top-level Python module or package: `unittest.py`, `unittest.pyc`, `unittest/__init__.py`. */
const topLevelModule =
  /^([A-Za-z_][A-Za-z0-9_]*)(?:\.py|\.pyc|\.pyw|(?:\.[^/]*)?\.so|\.pyd|\/__init__(?:\.[^/]*)?\.(?:py|pyc|so|pyd))$/;

function baseName(file: string): string {
  return file.slice(file.lastIndexOf("/") + 1);
}

/** Whether a path is harness by name alone, wherever it is in the tree. */
export function isHarnessPath(file: string): boolean {
  return (
    harnessDirectories.test(file) || harnessFileNames.some((name) => name.test(baseName(file)))
  );
}

/**
 * Whether a file the patch adds (or renames or copies into place) is a new top-level module named
 * like the standard library or a test runner. Changing an existing `calendar.py` of the project
 * is ordinary work; creating one that was not there shadows the real one.
 */
export function isShadowingModule(file: PatchedFile): boolean {
  if (file.change !== "added" && file.change !== "renamed" && file.change !== "copied") {
    return false;
  }
  const name = topLevelModule.exec(file.path)?.[1];
  return name !== undefined && shadowingModuleNames.has(name);
}

/**
 * Paths the test command names (`./run-tests.sh`, `python3 tools/check.py`): a script the command
 * runs is harness whatever its name. Words are taken loosely (quotes dropped, split on blanks and
 * shell operators); a word that names no file of the patch costs nothing.
 */
export function commandPaths(testCommand: string): Set<string> {
  const words = testCommand.replace(/["']/g, "").split(/[\s;&|()<>`$=]+/);
  return new Set(
    words
      .map((word) => word.replace(/^(\.\/)+/, ""))
      .filter((word) => word !== "" && !word.startsWith("-")),
  );
}

/**
 * Globs a user adds in `fixTests.protect`. Like .gitignore, a glob with no slash matches the
 * name in any directory (`*.sql`); one with a slash matches from the root (`db/migrations/**`).
 */
export function matchesProtectGlobs(file: string, globs: readonly string[]): boolean {
  return globs.some((glob) =>
    minimatch(file, glob.replace(/^\//, ""), { dot: true, matchBase: !glob.includes("/") }),
  );
}
