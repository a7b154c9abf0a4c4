import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { createContainerOptions } from "../../src/sandbox/docker/container-options.js";
import {
  dockerClient,
  execIn,
  removeContainer,
  requireSandboxImage,
  testLabel,
} from "../support/docker.js";
import { testRuntime, testSandboxSpec } from "../support/sandbox-spec.js";

/** CORDON_TEST_RUNTIME=runsc: the same attacks under gVisor, where some answers differ (docs/gvisor.md). */
const gvisor = testRuntime !== undefined && /^runsc/.test(testRuntime);

/**
 * The container contract of DESIGN.md §5, attacked from inside a real container created with
 * cordon's hardened options. Each test tries the escape and expects the kernel to refuse it.
 */
describe("a container with cordon's hardened defaults", () => {
  const docker = dockerClient();
  const created: Docker.Container[] = [];
  let image: string;
  let sandbox: Docker.Container;

  async function start(spec = testSandboxSpec("hardened")): Promise<Docker.Container> {
    const container = await docker.createContainer(
      createContainerOptions({
        spec,
        image,
        createdAt: new Date().toISOString(),
        extraLabels: testLabel,
      }),
    );
    created.push(container);
    await container.start();
    return container;
  }

  // As the agent: cordon names the sandbox user on every exec (the container's own is init's).
  const sh = (container: Docker.Container, script: string) =>
    execIn(container, ["bash", "-c", script], { user: "1000:1000" });

  beforeAll(async () => {
    image = await requireSandboxImage();
    sandbox = await start(
      testSandboxSpec("hardened", {
        docker: { pidsLimit: 64, memoryBytes: 128 * 1024 ** 2, memorySwapBytes: 128 * 1024 ** 2 },
      }),
    );
  });

  afterAll(async () => {
    for (const container of created) await removeContainer(container);
  });

  it("runs as the non-root sandbox user (uid 1000), with no way back to root", async () => {
    const id = await sh(sandbox, "id -u; id -g; id -un");
    expect(id.stdout.split("\n").slice(0, 3)).toEqual(["1000", "1000", "sandbox"]);
    // No sudo/su path to root: su needs a password and setuid is neutered by no-new-privileges.
    const su = await sh(sandbox, "su -c id root </dev/null");
    expect(su.exitCode).not.toBe(0);
  });

  it("has a read-only root filesystem while /tmp and /workspace-less tmpfs are writable", async () => {
    const root = await sh(sandbox, "touch /etc/cordon-escape");
    expect(root.exitCode).not.toBe(0);
    // gVisor refuses the write to a read-only mount with EACCES, not EROFS.
    expect(root.stderr).toMatch(gvisor ? /Permission denied/ : /Read-only file system/);
    const usr = await sh(sandbox, "echo x > /usr/bin/python3");
    expect(usr.exitCode).not.toBe(0);
    const tmp = await sh(sandbox, "echo hello > /tmp/f && cat /tmp/f && echo ok > /var/tmp/g");
    expect(tmp.exitCode).toBe(0);
    expect(tmp.stdout).toBe("hello\n");
  });

  it("runs programs written to /tmp and /var/tmp (go test, bats stubs), but never as setuid", async () => {
    // Docker mounts a tmpfs noexec unless told exec: `go test` then fails with
    // "fork/exec /tmp/go-build…/x.test: permission denied".
    const ran = await sh(
      sandbox,
      "for d in /tmp /var/tmp; do printf '#!/bin/sh\\necho ran from %s\\n' $d > $d/stub && chmod +x $d/stub && $d/stub; done",
    );
    expect(ran.stderr).toBe("");
    expect(ran.stdout).toBe("ran from /tmp\nran from /var/tmp\n");
    // gVisor's /proc/self/mounts leaves mount flags out: the Docker setting is checked instead.
    const tmpfs = (await sandbox.inspect()).HostConfig.Tmpfs ?? {};
    const mounts = await sh(sandbox, "grep -E ' /(tmp|var/tmp|run) ' /proc/self/mounts");
    for (const target of ["/tmp", "/var/tmp"]) {
      const line = gvisor
        ? tmpfs[target]?.split(",").join(" ")
        : mounts.stdout.split("\n").find((entry) => entry.split(" ")[1] === target);
      expect(line, target).toMatch(/\bnosuid\b.*\bnodev\b|\bnodev\b.*\bnosuid\b/);
      expect(line, target).not.toMatch(/\bnoexec\b/);
    }
  });

  it("has no capabilities and no-new-privileges set", async () => {
    const status = await sh(
      sandbox,
      "grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/self/status",
    );
    expect(status.stdout).toMatch(/CapEff:\s+0000000000000000/);
    expect(status.stdout).toMatch(/CapPrm:\s+0000000000000000/);
    expect(status.stdout).toMatch(/CapBnd:\s+0000000000000000/);
    // gVisor's /proc/self/status has no NoNewPrivs line; the Docker setting is checked instead.
    if (gvisor) {
      expect((await sandbox.inspect()).HostConfig.SecurityOpt).toContain("no-new-privileges:true");
    } else {
      expect(status.stdout).toMatch(/NoNewPrivs:\s+1/);
    }
    // A capability-needing operation fails even for things a normal user might try.
    const chown = await sh(sandbox, "touch /tmp/x && chown 0:0 /tmp/x");
    expect(chown.exitCode).not.toBe(0);
  });

  it("runs an init process as pid 1 that reaps orphans", async () => {
    const init = await sh(sandbox, "cat /proc/1/comm");
    expect(init.stdout.trim()).toMatch(/^(docker-init|tini)$/);
  });

  // Checkpoints rely on it (sandbox-quiet.ts): an agent that could ptrace init or the keep-alive
  // could make one map a workspace file for writing and change it while the sandbox looks idle.
  it("keeps init and the keep-alive out of the agent's reach: no ptrace, no /proc/<pid>/mem, no signal", async () => {
    const attack = await sh(
      sandbox,
      `python3 - <<'PY'
import ctypes, errno, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long
PTRACE_ATTACH, PTRACE_DETACH, PTRACE_SEIZE, WALL = 16, 17, 0x4206, 0x40000000

def keep_alive():
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read()
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if args == b"sleep\\0infinity\\0" and ppid == 1:
            return int(entry)
    raise SystemExit("no keep-alive found")

def uid(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(line.split()[1] for line in f if line.startswith("Uid:"))

def attack(pid):
    said = [f"uid={uid(pid)}"]
    for name, request in (("attach", PTRACE_ATTACH), ("seize", PTRACE_SEIZE)):
        if libc.ptrace(request, pid, None, None) == 0:
            said.append(f"{name}=ok")
            if request == PTRACE_ATTACH:
                os.waitpid(pid, WALL)
                libc.ptrace(PTRACE_DETACH, pid, None, None)
        else:
            said.append(f"{name}={errno.errorcode[ctypes.get_errno()]}")
    try:
        with open(f"/proc/{pid}/mem", "rb"):
            said.append("mem=ok")
    except OSError as e:
        said.append(f"mem={errno.errorcode[e.errno]}")
    try:
        os.kill(pid, 0)
        said.append("signal=ok")
    except OSError as e:
        said.append(f"signal={errno.errorcode[e.errno]}")
    return " ".join(said)

own = subprocess.Popen(["sleep", "60"])
print("init", attack(1))
print("keep-alive", attack(keep_alive()))
print("own", attack(own.pid))
own.kill()
PY`,
    );
    expect(attack.stderr).toBe("");
    expect(attack.stdout.split("\n")).toEqual([
      "init uid=65534 attach=EPERM seize=EPERM mem=EACCES signal=EPERM",
      "keep-alive uid=65534 attach=EPERM seize=EPERM mem=EACCES signal=EPERM",
      // The same attack on a process of its own succeeds: the refusals above are the uid's.
      "own uid=1000 attach=ok seize=ok mem=ok signal=ok",
      "",
    ]);
  });

  it("has no network: only loopback, and a connection to a reachable container fails", async () => {
    // A target that really listens, on the project's own bridge-networked container.
    const server = await start(
      testSandboxSpec("net-target", { docker: { network: "bridge", readOnlyRoot: false } }),
    );
    const serverExec = await server.exec({
      Cmd: ["python3", "-m", "http.server", "8080", "--bind", "0.0.0.0"],
    });
    await serverExec.start({ Detach: true });
    const serverIp = (await server.inspect()).NetworkSettings.Networks["bridge"]?.IPAddress;
    expect(serverIp).toBeTruthy();

    // Control: a bridge-networked container reaches it, so the probe itself works.
    const neighbour = await start(
      testSandboxSpec("net-control", { docker: { network: "bridge" } }),
    );
    const probe = `for i in $(seq 1 50); do curl -sS -o /dev/null -w '%{http_code}' --max-time 2 http://${serverIp}:8080/ && exit 0; sleep 0.2; done; exit 1`;
    const control = await sh(neighbour, probe);
    // Attempts before the server listens print 000; the last one is the answer.
    expect(control.exitCode).toBe(0);
    expect(control.stdout).toMatch(/200$/);

    const interfaces = await sh(sandbox, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
    expect(interfaces.stdout.trim().split("\n")).toEqual(["lo"]);
    const attempt = await sh(sandbox, `curl -sS --max-time 3 http://${serverIp}:8080/`);
    expect(attempt.exitCode).not.toBe(0);
    expect(attempt.stderr).toMatch(/(unreachable|Couldn't connect|Failed to connect)/i);
  });

  it("enforces the pids limit: a fork bomb is stopped", async () => {
    const bombed = await start(testSandboxSpec("pids", { docker: { pidsLimit: 64 } }));
    const limits = (await bombed.inspect()).HostConfig;
    if (gvisor) {
      // Under gVisor the limit is RLIMIT_NPROC inside its kernel (Docker's pids limit counts the
      // sentry's host threads, and reaching it would kill the whole sandbox).
      expect(limits.Ulimits).toContainEqual({ Name: "nproc", Soft: 64, Hard: 64 });
    } else {
      expect(limits.PidsLimit).toBe(64);
    }
    // Python forks without bash's retry-with-backoff, so the bomb hits the wall at once.
    const bomb = await sh(
      bombed,
      `python3 - <<'PY'
import os, signal, time
children, error = [], ""
for _ in range(500):
    try:
        pid = os.fork()
    except OSError as e:
        error = e.strerror
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children.append(pid)
print(f"forked={len(children)} error={error}")
for pid in children:
    os.kill(pid, signal.SIGKILL)
PY`,
    );
    const forked = Number(/forked=(\d+)/.exec(bomb.stdout)?.[1] ?? "NaN");
    expect(forked).toBeGreaterThan(10);
    expect(forked).toBeLessThan(64);
    expect(bomb.stdout).toMatch(/error=Resource temporarily unavailable/);
    // The fork failed; the sandbox did not die with it.
    expect((await sh(bombed, "echo alive")).stdout).toBe("alive\n");
  });

  // Under gVisor the memory limit bounds the whole sentry: past it the sandbox dies, not the
  // process (docs/gvisor.md), so this case runs only under runc.
  it.skipIf(gvisor)(
    "enforces the memory limit: allocating past it gets the process OOM-killed",
    async () => {
      const inspect = await sandbox.inspect();
      expect(inspect.HostConfig.Memory).toBe(128 * 1024 ** 2);
      const hog = await sh(sandbox, "python3 -c 'b = bytearray(400 * 1024 * 1024); print(len(b))'");
      // 137 = killed by SIGKILL (the OOM killer); the allocation never completed.
      expect(hog.exitCode).toBe(137);
      expect(hog.stdout).not.toContain("419430400");
      // The sandbox survives its process being killed.
      expect((await sh(sandbox, "echo alive")).stdout).toBe("alive\n");
    },
  );

  it("carries no host environment and cordon's labels", async () => {
    const env = await sh(sandbox, "env");
    expect(env.stdout).not.toMatch(/ANTHROPIC|DOCKER_HOST|SSH_AUTH_SOCK/);
    const labels = (await sandbox.inspect()).Config.Labels;
    expect(labels["cordon.managed"]).toBe("true");
    expect(labels["cordon.scope-key"]).toBe("session:test:hardened");
  });
});
