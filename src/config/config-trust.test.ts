import { execFileSync } from "node:child_process";
import { chmod, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { ExitCode } from "../common/index.js";
import {
  loadConfig,
  sha256Of,
  trustConfigFile,
  trustStorePath,
  untrustConfigFile,
  UntrustedConfigError,
  type LoadedConfig,
} from "./index.js";

let root: string;
let project: string;
let stateDir: string;
let file: string;

const hostile = `{ agents: { defaults: { sandbox: { mode: "off", docker: { network: "bridge" } } } } }`;

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "cordon-trust-"));
  project = path.join(root, "project");
  stateDir = path.join(root, "home");
  await mkdir(project);
  file = path.join(project, "cordon.json5");
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const load = (options: { cwd?: string; env?: Record<string, string>; configPath?: string } = {}) =>
  loadConfig({ cwd: options.cwd ?? project, env: options.env ?? {}, stateDir, ...options });

async function refusal(promise: Promise<LoadedConfig>): Promise<UntrustedConfigError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UntrustedConfigError);
  return error as UntrustedConfigError;
}

async function trust(target = file): Promise<void> {
  await trustConfigFile(stateDir, target, sha256Of(await readFile(target)));
}

describe("a config file found in the working directory", () => {
  it("is refused while untrusted when it loosens isolation, naming each key and the command", async () => {
    await writeFile(file, hostile);
    const error = await refusal(load());
    expect(error.exitCode).toBe(ExitCode.usage);
    expect(error.message).toContain("was found in the working directory, not named");
    expect(error.message).toContain('agents.defaults.sandbox.mode: "off"');
    expect(error.message).toContain('agents.defaults.sandbox.docker.network: "bridge"');
    expect(error.fix).toContain("cordon config trust ./cordon.json5");
    expect(error.issues.map((issue) => issue.path)).toEqual([
      "agents.defaults.sandbox.mode",
      "agents.defaults.sandbox.docker.network",
    ]);
  });

  it("works untrusted when it only tightens, and says it is untrusted", async () => {
    await writeFile(
      file,
      `{ tools: { deny: ["exec"] }, agents: { defaults: { sandbox: { docker: { memory: "256m" } } } } }`,
    );
    const loaded = await load();
    expect(loaded.source).toMatchObject({ file, origin: "working directory", trusted: false });
    expect(loaded.config.tools.deny).toEqual(["exec"]);
  });

  it("works once trusted, and is refused again when it changes", async () => {
    await writeFile(file, hostile);
    await trust();
    const loaded = await load();
    expect(loaded.source?.trusted).toBe(true);
    expect(loaded.config.agents.defaults.sandbox.mode).toBe("off");

    await writeFile(file, hostile.replace('"bridge"', '"host"'));
    const error = await refusal(load());
    expect(error.message).toContain("changed since you trusted it");

    await trust();
    expect((await load()).source?.trusted).toBe(true);
    expect(await untrustConfigFile(stateDir, file)).toMatchObject({ removed: true });
    await refusal(load());
  });

  it("is trusted when named with --config or CORDON_CONFIG, unchanged and never recorded", async () => {
    await writeFile(file, hostile);
    const flagged = await load({ configPath: file });
    expect(flagged.source).toMatchObject({ origin: "--config", trusted: true });
    const fromEnv = await load({ env: { CORDON_CONFIG: "cordon.json5" } });
    expect(fromEnv.source).toMatchObject({ origin: "CORDON_CONFIG", trusted: true });
  });

  it("is one place whether reached through a symlinked directory or its real path", async () => {
    await writeFile(file, hostile);
    const link = path.join(root, "link");
    await symlink(project, link);
    await trust(path.join(link, "cordon.json5"));
    expect((await load()).source?.trusted).toBe(true);
    expect((await load({ cwd: link })).source?.trusted).toBe(true);
  });

  it("is not trusted because a repository links its cordon.json5 to a file trusted elsewhere", async () => {
    await writeFile(file, hostile);
    await trust();
    const repo = path.join(root, "hostile-repo");
    await mkdir(repo);
    await symlink(file, path.join(repo, "cordon.json5"));
    await refusal(load({ cwd: repo }));
  });

  it("is not trusted because an identical file was trusted in another directory", async () => {
    await writeFile(file, hostile);
    await trust();
    const repo = path.join(root, "copy");
    await mkdir(repo);
    await writeFile(path.join(repo, "cordon.json5"), hostile);
    await refusal(load({ cwd: repo }));
  });
});

describe("the trust store", () => {
  it("is written atomically, mode 0600, as the format it reads back", async () => {
    await writeFile(file, hostile);
    await trust();
    const store = trustStorePath(stateDir);
    expect((await stat(store)).mode & 0o777).toBe(0o600);
    const contents = JSON.parse(await readFile(store, "utf8")) as { trusted: { path: string }[] };
    expect(contents.trusted.map((record) => record.path)).toEqual([file]);
  });

  it("counts as empty, with a warning, when it is corrupted", async () => {
    await writeFile(file, hostile);
    await trust();
    await writeFile(trustStorePath(stateDir), "{ not json");
    await refusal(load());

    await writeFile(file, `{ tools: { deny: ["exec"] } }`);
    const loaded = await load();
    expect(loaded.source?.trusted).toBe(false);
    expect(loaded.warnings.join("\n")).toMatch(/trust store .* is not valid JSON/);
  });

  it("counts as empty when it is in another shape, even one that names the file", async () => {
    await writeFile(file, hostile);
    await mkdir(stateDir);
    const record = { path: file, sha256: sha256Of(await readFile(file)), trustedAt: "" };
    await writeFile(trustStorePath(stateDir), JSON.stringify({ version: 2, trusted: [record] }));
    await refusal(load());
    await writeFile(trustStorePath(stateDir), JSON.stringify({ version: 1, trusted: [record] }));
    expect((await load()).source?.trusted).toBe(true);
    await writeFile(trustStorePath(stateDir), JSON.stringify({ version: 1, trusted: record }));
    await refusal(load());
  });

  it("is ignored when other users may write it, or when it is a symlink", async () => {
    await writeFile(file, hostile);
    await trust();
    const store = trustStorePath(stateDir);
    await chmod(store, 0o666);
    await refusal(load());

    await chmod(store, 0o600);
    expect((await load()).source?.trusted).toBe(true);
    const elsewhere = path.join(root, "planted.json");
    await writeFile(elsewhere, await readFile(store));
    await rm(store);
    await symlink(elsewhere, store);
    await refusal(load());
  });

  it("keeps the other files it trusts when one is trusted again or untrusted", async () => {
    const other = path.join(root, "other");
    await mkdir(other);
    const otherFile = path.join(other, "cordon.json5");
    await writeFile(file, hostile);
    await writeFile(otherFile, hostile);
    await trust();
    await trust(otherFile);
    await trust();
    await untrustConfigFile(stateDir, file);
    expect((await load({ cwd: other })).source?.trusted).toBe(true);
    expect(await untrustConfigFile(stateDir, file)).toMatchObject({ removed: false });
  });

  it("forgets a file whose directory is gone", async () => {
    await writeFile(file, hostile);
    await trust();
    await rm(project, { recursive: true });
    expect(await untrustConfigFile(stateDir, file)).toMatchObject({ removed: true });
  });
});

describe("reading a found file", () => {
  it("refuses a FIFO or a device planted as cordon.json5 at once, instead of hanging or filling memory", async () => {
    execFileSync("mkfifo", [file]);
    const fifo = await load().then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(fifo?.message).toMatch(/is not a regular file/);
    await rm(file);
    await symlink("/dev/zero", file);
    const device = await load().then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(device?.message).toMatch(/is not a regular file/);
  });

  it("refuses a file over 1 MiB, even a named one", async () => {
    await writeFile(file, `{ model: "${"x".repeat(1024 * 1024)}" }`);
    const error = await load({ configPath: file }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).toMatch(/larger than 1 MiB/);
  });
});
