import { execFileSync } from "node:child_process";
import { chmod, mkdir, readdir, symlink, writeFile } from "node:fs/promises";
import path from "node:path";

/** Secrets planted in the hostile repository's git state; none may reach a sandbox. */
export const plantedSecrets = {
  urlToken: "ghp_cordonPlantedUrlToken0001",
  extraHeader: "cordonPlantedExtraHeader0002",
  credentialHelper: "cordonPlantedCredentialStore0003",
  fetchHeadToken: "cordonPlantedFetchHeadToken0004",
} as const;

/** Every way the repository tries to run a command on the host; each one touches a marker. */
export const attackNames = [
  "filter-clean",
  "filter-process",
  "textconv",
  "external-diff",
  "fsmonitor",
  "fsmonitor-included",
  "hooks-path",
  "hook-post-index-change",
  "hook-reference-transaction",
  "hook-pre-commit",
  "hook-post-commit",
] as const;

export interface HostileRepository {
  /** The repository's work tree (its `.git` is a directory). */
  path: string;
  /** Where the attacks leave their marker files; empty while nothing ran. */
  markers: string;
}

const identity = ["-c", "user.name=victim", "-c", "user.email=victim@example.com"];

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", [...identity, ...args], {
    cwd,
    encoding: "utf8",
    env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" },
  });
}

/**
 * A git repository as an attacker leaves it (a downloaded tarball, or the real repository after
 * an `rw` agent wrote its `.git`): a clean filter and a long-running filter process named by
 * `.gitattributes`, a textconv and an external diff, fsmonitor (directly and through an
 * `include.path`), `core.hooksPath` and executable hooks, each touching a marker under
 * `markers`; credentials in a remote URL, an `http.extraheader`, a credential helper and
 * `FETCH_HEAD`; a symlink inside `.git` pointing at a host file.
 */
export async function makeHostileRepository(root: string): Promise<HostileRepository> {
  const repo = path.join(root, "hostile-repo");
  const markers = path.join(root, "markers");
  const tools = path.join(root, "attacker-tools");
  await mkdir(repo, { recursive: true });
  await mkdir(markers, { recursive: true });
  await mkdir(tools, { recursive: true });

  const script = async (file: string, marker: string, tail = ""): Promise<string> => {
    await writeFile(file, `#!/bin/sh\ntouch '${path.join(markers, marker)}'\n${tail}`);
    await chmod(file, 0o755);
    return file;
  };

  git(repo, "init", "-q");
  await writeFile(path.join(repo, "app.py"), "print('hello')\n");
  await writeFile(path.join(repo, "notes.txt"), "notes\n");
  git(repo, "add", "-A");
  git(repo, "commit", "-qm", "init");
  // Attributes are committed data; cordon copies them into the sandbox like any file.
  await writeFile(
    path.join(repo, ".gitattributes"),
    "*.py filter=evil diff=evil\n*.bin filter=evilproc\n*.txt diff=ext\n",
  );
  git(repo, "add", ".gitattributes");
  git(repo, "commit", "-qm", "attributes");

  const fsmonitor = await script(path.join(tools, "fsmonitor"), "fsmonitor");
  const included = path.join(tools, "included.cfg");
  await script(path.join(tools, "fsmonitor-included"), "fsmonitor-included");
  await writeFile(included, `[core]\n\tfsmonitor = ${path.join(tools, "fsmonitor-included")}\n`);
  const hooksPath = path.join(tools, "hooks");
  await mkdir(hooksPath);
  for (const hook of ["post-index-change", "pre-commit", "reference-transaction"]) {
    await script(path.join(hooksPath, hook), "hooks-path", "cat >/dev/null 2>&1 || true\n");
  }
  const config: [string, string][] = [
    ["filter.evil.clean", `sh -c 'touch ${path.join(markers, "filter-clean")}; cat'`],
    ["filter.evil.smudge", "cat"],
    ["filter.evilproc.process", await script(path.join(tools, "process"), "filter-process")],
    ["diff.evil.textconv", await script(path.join(tools, "textconv"), "textconv", 'cat "$1"\n')],
    ["diff.ext.command", await script(path.join(tools, "external-diff"), "external-diff")],
    ["core.fsmonitor", fsmonitor],
    ["remote.origin.url", `https://victim:${plantedSecrets.urlToken}@github.com/victim/repo.git`],
    ["http.https://github.com/.extraheader", `AUTHORIZATION: basic ${plantedSecrets.extraHeader}`],
    ["credential.helper", `store --file /tmp/${plantedSecrets.credentialHelper}`],
  ];
  for (const [key, value] of config) git(repo, "config", key, value);
  // Last: an include that turns fsmonitor on again, and hooksPath.
  git(repo, "config", "--add", "include.path", included);
  await writeFile(
    path.join(repo, ".git", "FETCH_HEAD"),
    `0000000000000000000000000000000000000000\t\tbranch 'main' of https://x:${plantedSecrets.fetchHeadToken}@github.com/victim/repo\n`,
  );
  for (const hook of ["post-index-change", "reference-transaction", "pre-commit", "post-commit"]) {
    await script(
      path.join(repo, ".git", "hooks", hook),
      `hook-${hook}`,
      "cat >/dev/null 2>&1 || true\n",
    );
  }
  // A symlink inside .git that a later host read could follow.
  await symlink("/etc/hostname", path.join(repo, ".git", "description-link"));
  // Uncommitted work the agent will see as the baseline; the untracked file is the filter
  // process's target (once run, the process fails whatever git was doing).
  await writeFile(path.join(repo, "app.py"), "print('hello, world')\n");
  await writeFile(path.join(repo, "data.bin"), "binary-ish\n");
  return { path: repo, markers };
}

/**
 * The second arming of the repository at `workTree` (which belongs to `repository`): the
 * `core.hooksPath` attack (it replaces `.git/hooks`) and fsmonitor set directly (the include,
 * which comes later and so wins, is dropped).
 */
export function armSecondVariant(repository: HostileRepository, workTree: string): void {
  git(workTree, "config", "--unset-all", "include.path");
  git(
    workTree,
    "config",
    "core.hooksPath",
    path.join(path.dirname(repository.markers), "attacker-tools", "hooks"),
  );
}

/** Marker files the attacks left. */
export async function markersLeft(repository: HostileRepository): Promise<string[]> {
  return (await readdir(repository.markers)).sort();
}

/**
 * What plain git run by a user does in (a copy of) the repository: status, add, commit,
 * update-ref, diff with textconv and external diff. Proves the attacks are armed.
 */
export function runPlainGit(workTree: string): void {
  // The attackers' commands do not speak git's protocols, so git may fail after running them.
  const attempt = (...args: string[]): void => {
    try {
      // safe.directory: a sandbox copy belongs to the container's user, not to this process.
      execFileSync("git", [...identity, "-c", "safe.directory=*", ...args], {
        cwd: workTree,
        stdio: "ignore",
      });
    } catch {
      // The marker is what counts.
    }
  };
  const append = (file: string): void => {
    execFileSync("sh", ["-c", `echo more >> ${file}`], { cwd: workTree });
  };
  attempt("status", "--short");
  attempt("add", "app.py", "notes.txt");
  attempt("commit", "-qm", "victim commits");
  attempt("update-ref", "refs/victim/x", "HEAD");
  append("notes.txt");
  append("app.py");
  attempt("diff", "--ext-diff");
  attempt("diff", "--textconv", "--no-ext-diff");
  // Last: the filter process fails the add once it has run.
  attempt("add", "data.bin");
}
