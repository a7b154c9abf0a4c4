import { execFile } from "node:child_process";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { DockerEngine } from "../../src/sandbox/index.js";
import { demoRepo } from "../support/demo-repo.js";
import { dockerClient } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";
import {
  makeEngineCertificates,
  startTlsEngineProxy,
  type EngineCertificates,
  type TlsEngineProxy,
} from "../support/tls-engine-proxy.js";

const run = promisify(execFile);

interface Report {
  ok: boolean;
  checks: { name: string; status: string; detail: string; fix?: string }[];
}

const check = (report: Report, name: string) => report.checks.find((c) => c.name === name);

/**
 * Which engine cordon talks to, resolved as the docker CLI resolves it: over TLS (a real TLS
 * endpoint that demands a client certificate, in front of the local engine), from a context the
 * real `docker context create` wrote, over ssh (the user's `ssh` running `docker system
 * dial-stdio`), and never silently the local socket.
 */
describe("engine resolution", () => {
  let root: string;
  let home: string;
  let certificates: EngineCertificates;
  let proxy: TlsEngineProxy;
  const env = (more: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    HOME: root,
    DOCKER_HOST: "",
    DOCKER_CONTEXT: "",
    DOCKER_CONFIG: "",
    DOCKER_TLS_VERIFY: "",
    DOCKER_CERT_PATH: "",
    ...more,
  });

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "cordon-engine-"));
    home = path.join(root, "state");
    certificates = await makeEngineCertificates(path.join(root, "certs"));
    proxy = await startTlsEngineProxy(certificates);
  });

  afterAll(async () => {
    await proxy?.close();
    await rm(root, { recursive: true, force: true });
  });

  it("talks TLS with DOCKER_TLS_VERIFY and DOCKER_CERT_PATH, and doctor says the engine is elsewhere", async () => {
    const before = proxy.accepted;
    const doctor = await runCordon(
      ["doctor", "--json"],
      env({
        DOCKER_HOST: proxy.host,
        DOCKER_TLS_VERIFY: "1",
        DOCKER_CERT_PATH: certificates.clientDirectory,
      }),
    );
    const report = JSON.parse(doctor.stdout) as Report;
    expect(check(report, "docker")?.status).toBe("ok");
    // Elsewhere is fine for a sandbox with a private copy (it lives in volumes there).
    expect(check(report, "engine")).toEqual({
      name: "engine",
      status: "ok",
      detail: expect.stringMatching(
        new RegExp(
          `^${proxy.host} \\(TLS\\), from DOCKER_HOST: elsewhere .*not sharing this host's filesystem — private copies live in volumes there; workspaceAccess "ro"/"rw" cannot be used on it$`,
        ),
      ) as unknown,
    });
    // The image check went through the same endpoint: the engine answered over TLS.
    expect(check(report, "image")?.status).toBe("ok");
    expect(proxy.accepted).toBeGreaterThan(before);
  });

  it("names TLS as the fix when the certificates do not match the engine", async () => {
    const stranger = await makeEngineCertificates(path.join(root, "stranger"));
    const setup = await runCordon(
      ["sandbox", "list"],
      env({
        DOCKER_HOST: proxy.host,
        DOCKER_TLS_VERIFY: "1",
        DOCKER_CERT_PATH: stranger.clientDirectory,
      }),
    );
    expect(setup.exitCode).toBe(3);
    expect(setup.stderr).toMatch(/the TLS connection to the Docker engine failed/);
    expect(setup.stderr).toMatch(/fix: check the TLS material/);
  });

  it("follows the current context the real docker CLI made, with its TLS material", async () => {
    const config = path.join(root, "docker-config");
    const docker = (...args: string[]) =>
      run("docker", args, { env: { ...process.env, DOCKER_CONFIG: config, DOCKER_HOST: "" } });
    const certs = certificates.clientDirectory;
    await docker(
      "context",
      "create",
      "remote",
      "--docker",
      `host=${proxy.host},ca=${certs}/ca.pem,cert=${certs}/cert.pem,key=${certs}/key.pem`,
    );
    await docker("context", "use", "remote");
    // The CLI itself reaches the engine this way: the endpoint is sound.
    expect((await docker("version", "--format", "{{.Server.APIVersion}}")).stdout).toMatch(
      /^1\.\d+/,
    );

    // A fresh endpoint: this process's https agent keeps connections alive per address.
    const fresh = await startTlsEngineProxy(certificates);
    await docker(
      "context",
      "update",
      "remote",
      "--docker",
      `host=${fresh.host},ca=${certs}/ca.pem,cert=${certs}/cert.pem,key=${certs}/key.pem`,
    );
    const doctor = await runCordon(["doctor", "--json"], env({ DOCKER_CONFIG: config })).finally(
      () => fresh.close(),
    );
    const report = JSON.parse(doctor.stdout) as Report;
    expect(check(report, "docker")?.status).toBe("ok");
    expect(check(report, "engine")?.detail).toContain(
      `${fresh.host} (TLS), docker context "remote" (from the docker config's currentContext)`,
    );
    expect(fresh.accepted).toBeGreaterThan(0);

    // DOCKER_HOST still wins over the context, as for the CLI.
    const local = await runCordon(
      ["doctor", "--json"],
      env({ DOCKER_CONFIG: config, DOCKER_HOST: "unix:///var/run/docker.sock" }),
    );
    expect(check(JSON.parse(local.stdout) as Report, "engine")?.detail).toBe(
      "unix:///var/run/docker.sock, from DOCKER_HOST; shares this host's filesystem",
    );
  });

  it("fails, never falling back to the local socket, for a context that does not exist", async () => {
    const config = path.join(root, "gone-config");
    await mkdir(config, { recursive: true });
    await writeFile(path.join(config, "config.json"), JSON.stringify({ currentContext: "gone" }));
    const repo = await demoRepo();
    const exec = await runCordon(
      ["exec", "--workspace", repo, "--session", "gone", "--", "true"],
      env({ DOCKER_CONFIG: config }),
    );
    expect(exec.exitCode).toBe(2);
    expect(exec.stderr).toMatch(/docker context "gone" \(currentContext in .*\) does not exist/);
    expect(exec.stderr).toMatch(/docker context use/);
    expect(await containersOf(home)).toEqual([]);
  });

  it("refuses workspaceAccess rw on an engine elsewhere with exit 2 before creating anything", async () => {
    const repo = await demoRepo();
    const tlsEnv = {
      DOCKER_HOST: proxy.host,
      DOCKER_TLS_VERIFY: "1",
      DOCKER_CERT_PATH: certificates.clientDirectory,
    };
    const rw = await runCordon(
      ["exec", "--workspace", repo, "--session", "remote-rw", "--", "true"],
      env({ ...tlsEnv, CORDON_WORKSPACE_ACCESS: "rw" }),
    );
    expect(rw.exitCode).toBe(2);
    expect(rw.stderr).toContain(
      `workspaceAccess "rw" binds ${repo} into the sandbox, and the Docker engine at ${proxy.host} (TLS), from DOCKER_HOST does not share this host's filesystem`,
    );
    expect(rw.stderr).toMatch(
      /fix: .*workspaceAccess "none".*volumes on that engine.*cordon apply/,
    );

    // Nothing was made: no container, no network, no private copy.
    expect(await containersOf(home)).toEqual([]);
    expect(await readdirOrEmpty(path.join(home, "workspaces"))).toEqual([]);
  });

  it("reaches the engine over ssh with the user's ssh running `docker system dial-stdio`", async () => {
    // A stand-in for OpenSSH that records its arguments and runs the remote command here: the
    // docker CLI's own dial-stdio then carries the engine's bytes, as on a real remote host.
    const bin = path.join(root, "bin");
    await mkdir(bin, { recursive: true });
    const log = path.join(root, "ssh-args");
    await writeFile(
      path.join(bin, "ssh"),
      [
        "#!/bin/sh",
        `printf '%s\\n' "$*" >> '${log}'`,
        'while [ "$1" != "--" ]; do shift; done',
        "shift 2",
        'DOCKER_HOST= DOCKER_CONTEXT= exec "$@"',
        "",
      ].join("\n"),
    );
    await chmod(path.join(bin, "ssh"), 0o755);
    const sshEnv = env({
      DOCKER_HOST: "ssh://builder@build-box:2222",
      PATH: `${bin}:${process.env["PATH"]}`,
    });
    const doctor = await runCordon(["doctor", "--json"], sshEnv);
    const report = JSON.parse(doctor.stdout) as Report;
    expect(check(report, "docker")?.status).toBe("ok");
    expect(check(report, "engine")?.detail).toMatch(
      /^ssh:\/\/builder@build-box:2222, from DOCKER_HOST: elsewhere/,
    );
    const calls = (await readFile(log, "utf8")).trim().split("\n");
    expect(calls[0]).toBe(
      "-o BatchMode=yes -o ConnectTimeout=30 -T -l builder -p 2222 -- build-box docker system dial-stdio",
    );

    // The library resolves the same engine from the same environment.
    const engine = DockerEngine.fromEnv(sshEnv);
    const images = await engine.images.tags("cordon-sandbox");
    expect(images.length).toBeGreaterThan(0);

    // ssh that fails says so, with what ssh said.
    await writeFile(
      path.join(bin, "ssh"),
      "#!/bin/sh\necho 'Host key verification failed.' >&2\nexit 255\n",
    );
    const refused = await runCordon(["sandbox", "list"], sshEnv);
    expect(refused.exitCode).toBe(3);
    expect(refused.stderr).toMatch(
      /cannot reach the Docker engine at ssh:\/\/builder@build-box:2222: ssh exited 255: Host key verification failed\./,
    );
  });
});

async function containersOf(home: string): Promise<string[]> {
  const containers = await dockerClient().listContainers({
    all: true,
    filters: { label: [`cordon.home=${home}`] },
  });
  return containers.map((container) => container.Id);
}

async function readdirOrEmpty(directory: string): Promise<string[]> {
  const { readdir } = await import("node:fs/promises");
  return readdir(directory).catch(() => []);
}
