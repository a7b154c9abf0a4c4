import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { once } from "node:events";
import { lstat, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { packageRoot } from "../../src/common/index.js";
import { createRunner } from "../../src/index.js";
import { EgressProxyImage } from "../../src/sandbox/docker/egress/index.js";
import {
  DockerEngine,
  privateWorkspacePath,
  type DockerSandbox,
  type EgressDecision,
  type SandboxSummary,
} from "../../src/sandbox/index.js";
import {
  demoRepo,
  example,
  git,
  repositoryOf,
  trustHostCertificatesConfig,
} from "../support/demo-repo.js";
import { dockerClient, requireSandboxImage } from "../support/docker.js";
import { withoutLocalEngine } from "../support/no-local-engine.js";
import { runCordon } from "../support/run-cli.js";
import { describeSandboxContract } from "../support/sandbox-contract.js";
import { startSecondEngine, type SecondEngine } from "../support/second-engine.js";
import { builtCli, runProcess } from "../support/spawn-cordon.js";
import { startDockerToolSandbox, type DockerToolSandbox } from "../support/tool-runner.js";

interface Report {
  ok: boolean;
  checks: { name: string; status: string; detail: string; fix?: string }[];
}

/** One GET by node:http (see port-forward.integration.test.ts for why not fetch). */
function get(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const request = http.get(url, { agent: false }, (response) => {
      let body = "";
      response.setEncoding("utf8").on("data", (chunk: string) => (body += chunk));
      response.on("error", reject);
      response.on("end", () => resolve(body));
    });
    request.on("error", reject);
    request.setTimeout(60_000, () => request.destroy(new Error(`${url}: no answer for 60 s`)));
  });
}

const exists = (file: string): Promise<boolean> =>
  lstat(file).then(
    () => true,
    () => false,
  );

/** calc-python's bug (a mean divided by one too many) fixed, then its tests run. */
const fixesMean = {
  version: 1,
  model: "scripted-mean",
  turns: [
    {
      content: [
        {
          type: "tool_use",
          name: "edit",
          input: {
            path: "calc.py",
            old_text: "sum(values) / (len(values) + 1)",
            new_text: "sum(values) / len(values)",
          },
        },
      ],
    },
    {
      content: [{ type: "tool_use", name: "exec", input: { command: "python3 -m unittest -v" } }],
    },
    { content: [{ type: "text", text: "mean() divided by one too many; fixed." }] },
  ],
};

/**
 * cordon against a real second Docker engine with its own filesystem (Debian's dockerd in a
 * container, test/support/second-engine.ts), over TCP+TLS and over ssh: doctor, the sandbox image
 * on that engine, and a sandbox there end to end — a scripted `cordon run`, `diff` and `apply`
 * writing the local repository, `fix-tests` on a fixture project, a port forward to a server in
 * the network-none sandbox, an egress allowlist whose squid runs there — with the private copy
 * only in volumes on that engine. What cannot work there (`workspaceAccess` "ro"/"rw") is
 * refused before anything is made.
 */
describe("a second engine with its own filesystem", () => {
  let root: string;
  let engine: SecondEngine;
  let sandboxImage: string;
  const repos: string[] = [];
  const homeOf = (name: string) => path.join(root, `state-${name}`);
  const env = (more: NodeJS.ProcessEnv, home = homeOf("probe")): NodeJS.ProcessEnv => ({
    CORDON_HOME: home,
    CORDON_CONFIG: "",
    HOME: root,
    DOCKER_HOST: "",
    DOCKER_CONTEXT: "",
    DOCKER_CONFIG: "",
    DOCKER_TLS_VERIFY: "",
    DOCKER_CERT_PATH: "",
    ANTHROPIC_API_KEY: "",
    ANTHROPIC_BASE_URL: "",
    ...more,
  });
  const transports = () =>
    [
      ["TLS", engine.tlsEnv, `${engine.tlsHost} (TLS), from DOCKER_HOST`],
      ["ssh", engine.sshEnv, `${engine.sshHost}, from DOCKER_HOST`],
    ] as const;
  const repository = async (source?: string): Promise<string> => {
    const repo = source ? await repositoryOf(source) : await demoRepo();
    repos.push(repo);
    return repo;
  };

  beforeAll(async () => {
    sandboxImage = await requireSandboxImage();
    root = await mkdtemp(path.join(tmpdir(), "cordon-second-engine-"));
    engine = await startSecondEngine({ directory: path.join(root, "engine") });
  }, 300_000);

  afterAll(async () => {
    await engine?.stop();
    for (const repo of repos) await rm(path.dirname(repo), { recursive: true, force: true });
    await rm(root, { recursive: true, force: true });
  });

  it("doctor names the engine over TLS and ssh and says it does not share this host's filesystem", async () => {
    for (const [, transport, where] of transports()) {
      const doctor = await runCordon(["doctor", "--json"], env(transport));
      const report = JSON.parse(doctor.stdout) as Report;
      const check = (name: string) => report.checks.find((c) => c.name === name);
      expect(check("docker")?.status, doctor.stdout).toBe("ok");
      expect(check("engine")).toMatchObject({
        status: "ok",
        detail: expect.stringContaining(`${where}: elsewhere`) as unknown,
      });
      expect(check("engine")?.detail).toContain("private copies live in volumes there");
      // Its own images: the sandbox image this host has is not there until it is loaded.
      expect(check("image")?.status).not.toBe("ok");
    }
  });

  it("finds the sandbox image on that engine once it is there, without building it again", async () => {
    // A new engine has no base image, and no registry to pull one from here: the fix is named.
    const before = await runCordon(["image", "status"], env(engine.sshEnv));
    expect(before.exitCode).toBe(3);
    expect(before.stderr).toMatch(/no base image for the sandbox image/);
    expect(before.stderr).toMatch(/fix: .*CORDON_BASE_IMAGE/);
    await engine.loadImages(["cordon-base:bookworm", sandboxImage]);
    const after = await runCordon(["image", "status"], env(engine.sshEnv));
    expect(after.stdout).toContain(`${sandboxImage} current`);
    const setup = await runCordon(["setup"], env(engine.tlsEnv));
    expect(setup.stderr).toMatch(/Docker engine 20\.10/);
    expect(setup.stderr).not.toMatch(/Step \d+\/\d+/);
    expect(setup.stdout).toMatch(/elsewhere/);
    expect((await engine.client.getImage(sandboxImage).inspect()).Id).toBe(
      (await dockerClient().getImage(sandboxImage).inspect()).Id,
    );
  });

  it('refuses workspaceAccess "ro" and "rw" with exit 2 naming the fix, and makes nothing on either engine', async () => {
    const repo = await repository();
    const home = homeOf("refused");
    for (const [name, transport] of transports()) {
      for (const access of ["ro", "rw"]) {
        const exec = await runCordon(
          ["exec", "--workspace", repo, "--session", `refused-${name}-${access}`, "--", "true"],
          env({ ...transport, CORDON_WORKSPACE_ACCESS: access }, home),
        );
        expect(exec.exitCode, exec.stderr).toBe(2);
        expect(exec.stderr).toContain(`workspaceAccess "${access}" binds ${repo} into the sandbox`);
        expect(exec.stderr).toMatch(/does not share this host's filesystem/);
        expect(exec.stderr).toMatch(/fix: set workspaceAccess "none".*cordon apply/);
      }
    }
    const made = await engine.client.listContainers({
      all: true,
      filters: { label: [`cordon.home=${home}`] },
    });
    expect(made).toEqual([]);
    const local = await dockerClient().listContainers({
      all: true,
      filters: { label: [`cordon.home=${home}`] },
    });
    expect(local).toEqual([]);
    expect(await readdir(path.join(home, "workspaces")).catch(() => [])).toEqual([]);
  });

  // The Sandbox contract (files, commands, symlinks, background processes) on a sandbox there,
  // through the resident executor, over each transport.
  for (const [name, transportOf] of [
    ["TLS", () => engine.tlsEnv],
    ["ssh", () => engine.sshEnv],
  ] as const) {
    describe(`the Sandbox contract over ${name}`, () => {
      let box: DockerToolSandbox | undefined;
      let sandbox: DockerSandbox;

      beforeAll(async () => {
        box = await startDockerToolSandbox({
          name: `contract-remote-${name.toLowerCase()}`,
          workspaceStorage: "volume",
          engine: { env: env(transportOf()), client: engine.client },
        });
        sandbox = box.sandbox;
      });

      afterAll(async () => {
        await box?.dispose();
      });

      describeSandboxContract(`DockerSandbox on the second engine over ${name}`, {
        sandbox: () => sandbox,
        runsCommands: true,
      });
    });
  }

  // Both transports the whole way: ssh carries exec, attach and archive streams through
  // `docker system dial-stdio`, TLS over a socket of its own.
  for (const [name, transportOf] of [
    ["TLS", () => engine.tlsEnv],
    ["ssh", () => engine.sshEnv],
  ] as const) {
    describe(`over ${name}`, () => {
      const session = `remote-${name}`;
      const home = () => homeOf(name);
      const cordon = (args: string[]) => runCordon(args, env(transportOf(), home()));

      async function sandboxOf(key: string): Promise<SandboxSummary> {
        const listed = await cordon(["sandbox", "list", "--json"]);
        const all = (JSON.parse(listed.stdout) as { sandboxes: SandboxSummary[] }).sandboxes;
        const found = all.find((sandbox) => sandbox.session === `agent:main:${key}`);
        if (!found) throw new Error(`no sandbox of ${key} in ${listed.stdout}`);
        return found;
      }

      it("a scripted run fixes the test there; diff and apply write the local repository; the copy is only in volumes there", async () => {
        const repo = await repository();
        const run = await cordon([
          "run",
          "--workspace",
          repo,
          "--session",
          session,
          "--model-script",
          example("demo", "script.json"),
          "--output-format",
          "json",
          "Fix the failing test.",
        ]);
        expect(run.exitCode, run.stderr).toBe(0);
        expect(JSON.parse(run.stdout)).toMatchObject({ status: "completed" });
        expect(git(repo, "status", "--porcelain")).toBe("");

        // The sandbox runs on the second engine, none on this host's; every mount is a volume
        // there (the hosts file is bound from its support volume's path on the engine's host).
        const sandbox = await sandboxOf(session);
        const container = await engine.client.getContainer(sandbox.name).inspect();
        expect(container.HostConfig.NetworkMode).toBe("none");
        const mounts = container.Mounts.map((m) => ({
          type: m.Type,
          name: m.Name ?? "",
          source: m.Source,
          target: m.Destination,
        }));
        expect(mounts.filter((m) => m.type !== "volume")).toEqual([
          expect.objectContaining({
            type: "bind",
            target: "/etc/hosts",
            source: expect.stringMatching(
              /^\/var\/lib\/docker\/volumes\/cordon-hosts-[0-9a-f]+-[0-9a-f]+\/_data\/hosts$/,
            ) as unknown,
          }),
        ]);
        expect(mounts.find((m) => m.target === "/workspace")).toMatchObject({
          type: "volume",
          name: `${sandbox.name}-workspace`,
        });
        const local = await dockerClient().listContainers({
          all: true,
          filters: { label: [`cordon.home=${home()}`] },
        });
        expect(local).toEqual([]);
        // Nothing of the copy on this host: no directory at its path, nothing mounted from the
        // state directory, only cordon's records (seed marker, baseline ref) beside it.
        expect(await exists(privateWorkspacePath(home(), sandbox.name))).toBe(false);
        expect(await readFile("/proc/self/mounts", "utf8")).not.toContain(home());
        const records = await readdir(path.join(home(), "workspaces"));
        for (const entry of records)
          expect(entry).toMatch(/^\.cordon-.*\.(seed\.json|baseline\.git)$/);

        const diff = await cordon(["diff", "--workspace", repo, "--session", session]);
        expect(diff.exitCode, diff.stderr).toBe(0);
        expect(diff.stdout).toContain("-    return subtotal + discount");
        expect(diff.stdout).toContain("+    return subtotal - discount");
        const apply = await cordon(["apply", "--workspace", repo, "--session", session]);
        expect(apply.exitCode, apply.stderr).toBe(0);
        expect(git(repo, "diff")).toContain("+    return subtotal - discount");
      });

      it("fix-tests fixes a fixture project there and verifies it on a clean copy", async () => {
        const repo = await repository(
          path.join(packageRoot(), "test", "fixtures", "fix-tests", "calc-python"),
        );
        const script = path.join(root, `fixes-mean-${name}.json`);
        await writeFile(script, JSON.stringify(fixesMean));
        const out = path.join(root, `fix-tests-${name}`);
        const fixed = await cordon([
          "fix-tests",
          "--workspace",
          repo,
          "--test-cmd",
          "python3 -m unittest -v",
          "--out",
          out,
          "--model-script",
          script,
        ]);
        expect(fixed.exitCode, fixed.stderr).toBe(0);
        const result = JSON.parse(await readFile(path.join(out, "result.json"), "utf8")) as {
          status: string;
          filesChanged: { path: string }[];
          verification?: { exitCode: number };
        };
        expect(result).toMatchObject({ status: "fixed", verification: { exitCode: 0 } });
        expect(result.filesChanged.map((file) => file.path)).toEqual(["calc.py"]);
        expect(await readFile(path.join(out, "changes.patch"), "utf8")).toContain(
          "+    return sum(values) / len(values)",
        );
        // Its sandboxes are gone from the engine again, and the repository is untouched.
        expect(git(repo, "status", "--porcelain")).toBe("");
        const left = await engine.client.listContainers({
          all: true,
          filters: { label: [`cordon.home=${home()}`] },
        });
        expect(left.map((c) => c.Names[0])).not.toContainEqual(
          expect.stringContaining("fix-tests"),
        );
      });

      it("port-forward reaches a server started in the network-none sandbox there", async () => {
        const repo = await repository();
        const runner = createRunner({ env: env(transportOf(), home()), workspace: repo });
        const key = `${session}-serve`;
        const started = await runner.callTool(
          "exec",
          {
            command:
              "echo served-from-the-second-engine > page.txt && python3 -m http.server 8000 --bind 127.0.0.1",
            background: true,
          },
          { sessionKey: key },
        );
        expect(started.isError).toBe(false);
        const forward = await runner.forwardPort({ sessionKey: key, remotePort: 8000 });
        try {
          expect(forward.address).toBe("127.0.0.1");
          let body = "";
          // The server may still be starting: nothing listens yet, the connection is closed.
          for (let attempt = 0; attempt < 150 && !body; attempt += 1) {
            body = await fetch(`http://127.0.0.1:${forward.localPort}/page.txt`, {
              signal: AbortSignal.timeout(60_000),
            })
              .then((response) => response.text())
              .catch(async (error: unknown) => {
                if ((error as Error).name === "TimeoutError") throw error;
                await new Promise((resolve) => setTimeout(resolve, 200));
                return "";
              });
          }
          expect(body).toBe("served-from-the-second-engine\n");
          const info = await engine.client.getContainer(forward.sandbox).inspect();
          expect(info.HostConfig.NetworkMode).toBe("none");
        } finally {
          await forward.close();
          await runner.close();
        }
        // rm removes the sandboxes and their volumes on that engine.
        const removed = await cordon(["sandbox", "rm", "--all", "--discard-changes"]);
        expect(removed.exitCode, removed.stderr).toBe(0);
        const volumes = await engine.client.listVolumes({
          filters: { label: [`cordon.home=${home()}`] },
        });
        expect(volumes.Volumes ?? []).toEqual([]);
      });
    });
  }

  it("the built CLI with no local engine in reach: run, diff && apply, and port-forward over ssh", async () => {
    // The Done-when as a user meets it: this host has no engine (its socket's directory is an
    // empty tmpfs in a mount namespace of the CLI's own), DOCKER_HOST is the engine over ssh.
    const repo = await repository();
    const home = homeOf("no-local-engine");
    const cliEnv = { ...process.env, ...env(engine.sshEnv, home), CORDON_LOG_LEVEL: "silent" };
    const cordon = (args: string[]) => {
      const wrapped = withoutLocalEngine(process.execPath, [builtCli, ...args]);
      return runProcess(wrapped.command, wrapped.args, { env: cliEnv, cwd: repo });
    };
    const started: ReturnType<typeof spawn>[] = [];
    const startCordon = (args: string[]) => {
      const wrapped = withoutLocalEngine(process.execPath, [builtCli, ...args]);
      const child = spawn(wrapped.command, wrapped.args, { env: cliEnv, cwd: repo, stdio: "pipe" });
      started.push(child);
      let output = "";
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
      return { child, output: () => output };
    };
    try {
      // The namespace holds: no socket, and with DOCKER_HOST unset the CLI reaches no engine.
      const unset = { ...cliEnv, DOCKER_HOST: "" };
      const wrappedDoctor = withoutLocalEngine(process.execPath, [builtCli, "doctor", "--json"]);
      const doctor = await runProcess(wrappedDoctor.command, wrappedDoctor.args, { env: unset });
      const docker = (JSON.parse(doctor.stdout.toString()) as Report).checks.find(
        (check) => check.name === "docker",
      );
      expect(docker?.status, doctor.stderr).toBe("fail");
      expect(docker?.detail).toMatch(/docker\.sock/);

      const run = await cordon([
        "run",
        "--model-script",
        example("demo", "script.json"),
        "Fix the failing test.",
      ]);
      expect(run.code, run.stderr).toBe(0);
      const diff = await cordon(["diff"]);
      expect(diff.code, diff.stderr).toBe(0);
      expect(diff.stdout.toString()).toContain("+    return subtotal - discount");
      const apply = await cordon(["apply"]);
      expect(apply.code, apply.stderr).toBe(0);
      expect(git(repo, "diff")).toContain("+    return subtotal - discount");

      // A server started by `cordon exec` in the sandbox, reached by `cordon port-forward`.
      const server = startCordon([
        "exec",
        "--",
        "sh",
        "-c",
        "echo served-with-no-local-engine > page.txt; exec python3 -m http.server 8000 --bind 127.0.0.1",
      ]);
      const forward = startCordon(["port-forward", ":8000"]);
      let port = "";
      for (let attempt = 0; attempt < 600 && !port; attempt += 1) {
        port = /Forwarding from 127\.0\.0\.1:(\d+) -> 8000/.exec(forward.output())?.[1] ?? "";
        if (!port) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(port, forward.output()).not.toBe("");
      let body = "";
      // The server may still be starting: nothing listens yet, the connection is closed.
      for (let attempt = 0; attempt < 300 && !body; attempt += 1) {
        body = await get(`http://127.0.0.1:${port}/page.txt`).catch(async () => {
          await new Promise((resolve) => setTimeout(resolve, 200));
          return "";
        });
      }
      expect(body, `${forward.output()}\n${server.output()}`).toBe("served-with-no-local-engine\n");
      for (const { child } of [forward, server]) {
        child.kill("SIGINT");
        await once(child, "close");
      }
      expect(forward.output()).toMatch(/stopped forwarding/);
    } finally {
      for (const child of started) if (child.exitCode === null) child.kill("SIGKILL");
    }

    // Everything was made on that engine, nothing on this host's.
    const there = await engine.client.listContainers({
      all: true,
      filters: { label: [`cordon.home=${home}`] },
    });
    expect(there).toHaveLength(1);
    const local = dockerClient();
    const filters = { label: [`cordon.home=${home}`] };
    expect(await local.listContainers({ all: true, filters })).toEqual([]);
    expect((await local.listVolumes({ filters })).Volumes ?? []).toEqual([]);
    const removed = await runCordon(
      ["sandbox", "rm", "--all", "--discard-changes"],
      env(engine.sshEnv, home),
    );
    expect(removed.exitCode, removed.stderr).toBe(0);
  });

  it("an egress allowlist there: squid on that engine, reached through its container; refusals are events; the host's CA bundle travels", async () => {
    // The proxy image as this host built it (no registry; its tag is its inputs' hash).
    const proxyImage = await new EgressProxyImage(new DockerEngine()).resolve();
    await engine.loadImages([proxyImage]);
    const repo = await repository();
    const home = homeOf("egress");
    const decisions: EgressDecision[] = [];
    // This machine's egress re-signs HTTPS (docs/network.md): the sandbox trusts the host's CA
    // bundle, which must reach that engine as a volume — this host's path means nothing there.
    const trustConfig = await trustHostCertificatesConfig(root);
    const runner = createRunner({
      env: env(engine.sshEnv, home),
      workspace: repo,
      configPath: trustConfig,
      allowHosts: ["deb.debian.org", "registry.npmjs.org"],
    });
    const { plan, lease } = await runner.acquireSandbox({
      sessionKey: "egress",
      onEgress: (decision) => decisions.push(decision),
    });
    const decisionFor = async (host: string): Promise<EgressDecision> => {
      for (let attempt = 0; attempt < 100; attempt += 1) {
        const found = decisions.find((decision) => decision.host === host);
        if (found) return found;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      throw new Error(`no egress decision for ${host}; got ${JSON.stringify(decisions)}`);
    };
    try {
      const spec = plan.sandbox.spec;
      const proxy = spec?.egress?.proxyContainer ?? "";
      // Both on that engine, none on this host's; the sandbox keeps network none, and squid
      // publishes nothing: its address is on that engine's own bridge.
      const sandbox = await engine.client.getContainer(spec?.containerName ?? "").inspect();
      expect(sandbox.HostConfig.NetworkMode).toBe("none");
      const squid = await engine.client.getContainer(proxy).inspect();
      expect(squid.HostConfig.PortBindings ?? {}).toEqual({});
      expect(
        await dockerClient().listContainers({ all: true, filters: { name: [proxy] } }),
      ).toEqual([]);

      // A refused request is answered by squid itself, through the channel.
      const refused = await lease.sandbox.exec(
        "curl -sS -m 60 -o /dev/null -w '%{http_code}' https://192.0.2.1/ 2>&1",
        { timeoutMs: 90_000 },
      );
      expect(refused.stdout).toMatch(/403/);
      expect(await decisionFor("192.0.2.1")).toMatchObject({ port: 443, allowed: false });
      const offList = await lease.sandbox.exec(
        "curl -sS -m 60 -o /dev/null -w '%{http_code}' http://example.com/ 2>&1",
        { timeoutMs: 90_000 },
      );
      expect(offList.stdout).toMatch(/403/);
      expect(await decisionFor("example.com")).toMatchObject({ allowed: false });

      // The allowed host, over plain HTTP (Debian's mirror): through squid and that engine's
      // network to the internet.
      const allowed = await lease.sandbox.exec(
        "curl -sS -m 60 -o /dev/null -w '%{http_code}' http://deb.debian.org/debian/dists/bookworm/Release 2>&1",
        { timeoutMs: 90_000 },
      );
      expect(allowed.stdout).toBe("200");
      expect(await decisionFor("deb.debian.org")).toMatchObject({ port: 80, allowed: true });

      // HTTPS through the re-signing egress verifies against the host's bundle, which is a
      // support volume of that engine (no bind), byte for byte this host's file.
      const caMount = sandbox.Mounts.find((m) => m.Destination === "/usr/local/share/cordon");
      expect(caMount).toMatchObject({ Type: "volume", RW: false });
      expect(caMount?.Name).toMatch(/^cordon-ca-certificates-[0-9a-f]{16}-[0-9a-f]{8}$/);
      const caSource = spec?.mounts.find((m) => m.role === "ca-certificates")?.source ?? "";
      const shown = await lease.sandbox.exec('sha256sum < "$SSL_CERT_FILE"');
      expect(shown.stdout.split(" ")[0]).toBe(
        createHash("sha256")
          .update(await readFile(caSource))
          .digest("hex"),
      );
      const verified = await lease.sandbox.exec(
        "curl -sS -m 60 -o /dev/null -w '%{http_code}' https://registry.npmjs.org/mocha 2>&1",
        { timeoutMs: 90_000 },
      );
      expect(verified.stdout).toBe("200");
    } finally {
      await lease.release();
      await runner.close();
    }
    const removed = await runCordon(
      ["sandbox", "rm", "--all", "--discard-changes"],
      env(engine.sshEnv, home),
    );
    expect(removed.exitCode, removed.stderr).toBe(0);
    const left = await engine.client.listContainers({
      all: true,
      filters: { label: [`cordon.home=${home}`] },
    });
    expect(left).toEqual([]);
  });
});
