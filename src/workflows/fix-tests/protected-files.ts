/**
 * Files an agent fixing failing tests must not change by default: the tests themselves, CI
 * configuration, dependency lockfiles, and the test harness (what the test command runs: the
 * Makefile, package.json scripts, runner configs, modules that shadow the runner). An agent that
 * "fixes" a failure by editing the test, skipping a CI step, pinning a different dependency or
 * rewriting `make test` has not fixed the code.
 */
import type { PatchedFile } from "../../changes/index.js";
import {
  commandPaths,
  isHarnessPath,
  isShadowingModule,
  matchesProtectGlobs,
} from "./harness-files.js";

export type ProtectedKind = "test" | "ci" | "lockfile" | "harness";

const lockfiles = new Set([
  "package-lock.json",
  "npm-shrinkwrap.json",
  "yarn.lock",
  "pnpm-lock.yaml",
  "bun.lockb",
  "bun.lock",
  "Cargo.lock",
  "poetry.lock",
  "uv.lock",
  "Pipfile.lock",
  "pdm.lock",
  "Gemfile.lock",
  "composer.lock",
  "go.sum",
  "mix.lock",
  "pubspec.lock",
  "packages.lock.json",
  "flake.lock",
]);

const ciPaths = [
  /^\.github\/(workflows|actions)\//,
  /^\.gitlab-ci\.ya?ml$/,
  /^\.gitlab\//,
  /^\.circleci\//,
  /^\.buildkite\//,
  /^\.travis\.ya?ml$/,
  /^azure-pipelines\.ya?ml$/,
  /^Jenkinsfile$/,
  /^\.drone\.ya?ml$/,
  /^bitbucket-pipelines\.ya?ml$/,
  /^\.woodpecker(\.ya?ml|\/)/,
];

const testDirectories = /(^|\/)(tests?|__tests__|specs?|testing|testdata|fixtures|__snapshots__)\//;

const testFileNames = [
  /^test_.*\.py$/,
  /_test\.(py|go|rb|exs?|dart|cc|cpp|c)$/,
  /\.(test|spec)\.[cm]?[jt]sx?$/,
  /(Test|Tests|Spec|IT)\.(java|kt|scala|cs|swift|php)$/,
  /_spec\.rb$/,
  /\.snap$/,
];

/**
 * Whether a workspace-relative path is a test, CI, lockfile or harness file by its name alone;
 * undefined for ordinary code (or a file judged by content: see harness-content.ts).
 */
export function protectedKind(file: string): ProtectedKind | undefined {
  const normal = file.replace(/^\.\//, "");
  const base = normal.slice(normal.lastIndexOf("/") + 1);
  if (isHarnessPath(normal)) return "harness";
  if (lockfiles.has(base)) return "lockfile";
  if (ciPaths.some((pattern) => pattern.test(normal))) return "ci";
  if (testDirectories.test(normal) || testFileNames.some((pattern) => pattern.test(base))) {
    return "test";
  }
  return undefined;
}

/** What decides which files are protected in one fix-tests run. */
export interface ProtectionRules {
  /** The test command: a file it names (`./run-tests.sh`) is harness. */
  testCommand: string;
  /** `fixTests.protect` from the config: more globs, treated as harness. */
  protect?: readonly string[] | undefined;
}

/**
 * The kind of one path a patch touches under these rules. `file` is the patch entry it came from,
 * for the rules that depend on the change (a new module shadowing the standard library).
 */
export function protectedKindOf(
  path: string,
  file: PatchedFile,
  rules: ProtectionRules,
): ProtectedKind | undefined {
  if (path === file.path && isShadowingModule(file)) return "harness";
  if (commandPaths(rules.testCommand).has(path)) return "harness";
  if (matchesProtectGlobs(path, rules.protect ?? [])) return "harness";
  return protectedKind(path);
}

/** Every protected path a patch touches (both sides of a rename or copy), with its kind. */
export function protectedPaths(
  files: readonly PatchedFile[],
  rules: ProtectionRules,
): Map<string, ProtectedKind> {
  const found = new Map<string, ProtectedKind>();
  for (const file of files) {
    for (const path of [file.path, file.from]) {
      if (path === undefined) continue;
      const kind = protectedKindOf(path, file, rules);
      if (kind !== undefined && !found.has(path)) found.set(path, kind);
    }
  }
  return found;
}
