/**
 * Files an agent fixing failing tests must not change by default: the tests themselves, CI
 * configuration and dependency lockfiles. An agent that "fixes" a failure by editing the test,
 * skipping a CI step or pinning a different dependency has not fixed the code.
 */

export type ProtectedKind = "test" | "ci" | "lockfile";

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
  /^conftest\.py$/,
  /\.(test|spec)\.[cm]?[jt]sx?$/,
  /(Test|Tests|Spec|IT)\.(java|kt|scala|cs|swift|php)$/,
  /_spec\.rb$/,
  /\.snap$/,
];

/** Whether a workspace-relative path is a test, CI or lockfile; undefined for ordinary code. */
export function protectedKind(file: string): ProtectedKind | undefined {
  const normal = file.replace(/^\.\//, "");
  const base = normal.slice(normal.lastIndexOf("/") + 1);
  if (lockfiles.has(base)) return "lockfile";
  if (ciPaths.some((pattern) => pattern.test(normal))) return "ci";
  if (testDirectories.test(normal) || testFileNames.some((pattern) => pattern.test(base))) {
    return "test";
  }
  return undefined;
}
