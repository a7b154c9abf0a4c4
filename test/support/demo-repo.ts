import { execFileSync } from "node:child_process";
import { cp, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { packageRoot } from "../../src/common/index.js";

const gitEnv = {
  ...process.env,
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_AUTHOR_NAME: "test",
  GIT_AUTHOR_EMAIL: "test@example.invalid",
  GIT_COMMITTER_NAME: "test",
  GIT_COMMITTER_EMAIL: "test@example.invalid",
};

export function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, { cwd, env: gitEnv, encoding: "utf8" });
}

/** A fresh git repository holding examples/demo-repo (pricing.py with a failing test). */
export async function demoRepo(): Promise<string> {
  return repositoryOf(path.join(packageRoot(), "examples", "demo-repo"));
}

/**
 * A fresh git repository (one commit) holding a copy of `source`, at `<temp>/repo`; remove its
 * parent directory when done.
 */
export async function repositoryOf(source: string): Promise<string> {
  const root = await mkdtemp(path.join(tmpdir(), "cordon-demo-repo-"));
  const repo = path.join(root, "repo");
  await cp(source, repo, { recursive: true });
  git(repo, "init", "-q");
  git(repo, "add", "-A");
  git(repo, "commit", "-qm", "demo");
  return repo;
}

/** Path of a file under test/fixtures/. */
export function fixture(...parts: string[]): string {
  return path.join(packageRoot(), "test", "fixtures", ...parts);
}

/**
 * A config file in `directory` that has sandboxes trust this host's CA bundle: this machine's
 * egress re-signs HTTPS (as a corporate proxy does), and docs/network.md tells such users to set
 * it in their own, trusted config. Returns its path.
 */
export async function trustHostCertificatesConfig(directory: string): Promise<string> {
  const file = path.join(directory, "trust.json5");
  await writeFile(
    file,
    "{ agents: { defaults: { sandbox: { egress: { trustHostCertificates: true } } } } }\n",
  );
  return file;
}

/** Path of a file under examples/. */
export function example(...parts: string[]): string {
  return path.join(packageRoot(), "examples", ...parts);
}
