import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import Docker from "dockerode";

import { dockerClient, testLabel } from "./docker.js";
import { makeEngineCertificates } from "./tls-engine-proxy.js";

const run = promisify(execFile);
const contextDirectory = fileURLToPath(new URL("./second-engine", import.meta.url));

/** Label on the engine's container, so a test run cut short leaves something findable. */
export const secondEngineLabel = "cordon.test.second-engine";

/**
 * A real second Docker engine with its own filesystem: Debian's dockerd in a container of the
 * local engine (test/support/second-engine/), reached over TCP+TLS on loopback with certificates
 * made for it, and over ssh (an sshd in the same container, a key made for it, the real OpenSSH
 * client with BatchMode). Nothing it runs sees this host's paths.
 */
export interface SecondEngine {
  /** The engine's container on the local engine. */
  containerId: string;
  /** `tcp://127.0.0.1:PORT`. */
  tlsHost: string;
  /** DOCKER_HOST, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH for it, as the docker CLI reads them. */
  tlsEnv: NodeJS.ProcessEnv;
  /** `ssh://second-engine`: an ssh host alias in the config the `ssh` of `sshEnv` reads. */
  sshHost: string;
  /**
   * DOCKER_HOST and a PATH whose `ssh` is OpenSSH with this engine's config (its port, the key
   * made for it, its host key pinned): what `~/.ssh/config` does for a user.
   */
  sshEnv: NodeJS.ProcessEnv;
  /** A client of the second engine over TLS. */
  client: Docker;
  /** Copies images from the local engine into it (`docker save` → its load API); no registry. */
  loadImages(references: readonly string[]): Promise<void>;
  /** Removes the container with its engine, its images and containers; idempotent. */
  stop(): Promise<void>;
}

export interface StartSecondEngineOptions {
  /** A directory of its own for certificates, keys and the ssh wrapper (the caller removes it). */
  directory: string;
  /** How long to wait for the engine to answer; default 120 s (a loaded CI machine). */
  readyTimeoutMs?: number;
}

/** Builds the engine's image when its inputs changed (about 45 s: docker.io from Debian's mirror). */
export async function secondEngineImage(): Promise<string> {
  const hash = createHash("sha256");
  for (const file of ["Dockerfile", "start-engine.sh"]) {
    hash.update(await readFile(path.join(contextDirectory, file)));
  }
  const tag = `cordon-test-engine:${hash.digest("hex").slice(0, 12)}`;
  const docker = dockerClient();
  const present = await docker
    .getImage(tag)
    .inspect()
    .then(
      () => true,
      () => false,
    );
  if (!present) {
    await run("docker", ["build", "--quiet", "--tag", tag, contextDirectory], {
      env: { ...process.env, DOCKER_HOST: "" },
      maxBuffer: 16 * 1024 * 1024,
    });
  }
  return tag;
}

export async function startSecondEngine(options: StartSecondEngineOptions): Promise<SecondEngine> {
  const { directory } = options;
  const image = await secondEngineImage();
  const certificates = await makeEngineCertificates(path.join(directory, "tls"));
  const sshDirectory = path.join(directory, "ssh");
  await mkdir(sshDirectory, { recursive: true });
  const key = path.join(sshDirectory, "id_ed25519");
  await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "cordon-test", "-f", key]);

  // What the container gets before it starts: the engine's TLS files and the authorized key.
  const serverFiles = path.join(directory, "server");
  await mkdir(path.join(serverFiles, "tls"), { recursive: true });
  await mkdir(path.join(serverFiles, "ssh"), { recursive: true, mode: 0o700 });
  await writeFile(path.join(serverFiles, "tls", "ca.pem"), certificates.ca);
  await writeFile(path.join(serverFiles, "tls", "server-cert.pem"), certificates.serverCert);
  await writeFile(path.join(serverFiles, "tls", "server-key.pem"), certificates.serverKey, {
    mode: 0o600,
  });
  await writeFile(path.join(serverFiles, "ssh", "authorized_keys"), await readFile(`${key}.pub`), {
    mode: 0o600,
  });

  const docker = dockerClient();
  const container = await docker.createContainer({
    Image: image,
    Labels: { ...testLabel, [secondEngineLabel]: "1" },
    ExposedPorts: { "2376/tcp": {}, "22/tcp": {} },
    HostConfig: {
      // Not Privileged (the outer engine cannot grant CAP_SYS_RESOURCE here): every other
      // capability, no seccomp or AppArmor, which dockerd needs to run containers.
      CapAdd: ["ALL"],
      CapDrop: ["SYS_RESOURCE"],
      SecurityOpt: ["seccomp=unconfined", "apparmor=unconfined"],
      // Its own /var/lib/docker (overlay2 does not stack on the container's overlay root); an
      // anonymous volume, removed with the container.
      Mounts: [{ Type: "volume", Source: "", Target: "/var/lib/docker" }],
      PortBindings: {
        "2376/tcp": [{ HostIp: "127.0.0.1", HostPort: "" }],
        "22/tcp": [{ HostIp: "127.0.0.1", HostPort: "" }],
      },
    },
  });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await container.remove({ force: true, v: true }).catch((error: unknown) => {
      if ((error as { statusCode?: number }).statusCode !== 404) throw error;
    });
  };
  try {
    const copyInto = (source: string, target: string) =>
      run("docker", ["cp", `${source}/.`, `${container.id}:${target}`], {
        env: { ...process.env, DOCKER_HOST: "" },
      });
    await copyInto(path.join(serverFiles, "tls"), "/etc/engine-tls");
    await copyInto(path.join(serverFiles, "ssh"), "/root/.ssh");
    await container.start();
    const ports = (await container.inspect()).NetworkSettings.Ports;
    const tlsPort = ports["2376/tcp"]?.[0]?.HostPort;
    const sshPort = ports["22/tcp"]?.[0]?.HostPort;
    if (!tlsPort || !sshPort) throw new Error("the second engine's ports were not published");

    const client = new Docker({
      host: "127.0.0.1",
      port: Number(tlsPort),
      protocol: "https",
      ca: certificates.ca,
      cert: await readFile(path.join(certificates.clientDirectory, "cert.pem")),
      key: await readFile(path.join(certificates.clientDirectory, "key.pem")),
    });
    await waitUntil(
      () => client.ping().then(() => true),
      options.readyTimeoutMs ?? 120_000,
      async () =>
        `the second engine did not answer over TLS; its log:\n${await engineLog(container.id)}`,
    );

    // The host key read through the outer engine (an authenticated channel) and pinned: the
    // real client checks it as it would a known host.
    const hostKey = await execIn(container.id, ["cat", "/etc/ssh/ssh_host_ed25519_key.pub"]);
    const knownHosts = path.join(sshDirectory, "known_hosts");
    await writeFile(knownHosts, `second-engine ${hostKey.split(" ").slice(0, 2).join(" ")}\n`);
    const config = path.join(sshDirectory, "config");
    await writeFile(
      config,
      [
        "Host second-engine",
        "  HostName 127.0.0.1",
        `  Port ${sshPort}`,
        "  User root",
        `  IdentityFile ${key}`,
        "  IdentitiesOnly yes",
        "  HostKeyAlias second-engine",
        `  UserKnownHostsFile ${knownHosts}`,
        "  StrictHostKeyChecking yes",
        "  LogLevel ERROR",
        "",
      ].join("\n"),
    );
    const bin = path.join(directory, "bin");
    await mkdir(bin, { recursive: true });
    const ssh = path.join(bin, "ssh");
    await writeFile(ssh, `#!/bin/sh\nexec /usr/bin/ssh -F '${config}' "$@"\n`);
    await chmod(ssh, 0o755);

    const tlsHost = `tcp://127.0.0.1:${tlsPort}`;
    return {
      containerId: container.id,
      tlsHost,
      tlsEnv: {
        DOCKER_HOST: tlsHost,
        DOCKER_TLS_VERIFY: "1",
        DOCKER_CERT_PATH: certificates.clientDirectory,
      },
      sshHost: "ssh://second-engine",
      sshEnv: {
        DOCKER_HOST: "ssh://second-engine",
        PATH: `${bin}:${process.env.PATH ?? "/usr/bin:/bin"}`,
      },
      client,
      loadImages: async (references) => {
        for (const reference of references) {
          const saved = await docker.getImage(reference).get();
          const loading = await client.loadImage(saved);
          await new Promise<void>((resolve, reject) =>
            client.modem.followProgress(loading, (error: Error | null) =>
              error ? reject(error) : resolve(),
            ),
          );
        }
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function execIn(containerId: string, command: string[]): Promise<string> {
  const { stdout } = await run("docker", ["exec", containerId, ...command], {
    env: { ...process.env, DOCKER_HOST: "" },
  });
  return stdout.trim();
}

/** dockerd's last lines (its output is the container's). */
async function engineLog(containerId: string): Promise<string> {
  const { stdout, stderr } = await run("docker", ["logs", "--tail", "30", containerId], {
    env: { ...process.env, DOCKER_HOST: "" },
  }).catch((error: unknown) => ({ stdout: "", stderr: String(error) }));
  return `${stdout}${stderr}`;
}

async function waitUntil(
  ready: () => Promise<boolean>,
  timeoutMs: number,
  describe: () => Promise<string>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await ready().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(await describe());
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
