import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { describe, expect, it } from "vitest";

import { dockerClient, requireSandboxImage, testLabel } from "../support/docker.js";
import { runCordon } from "../support/run-cli.js";

const engineRuntimes = Object.keys(
  ((await dockerClient().info()) as { Runtimes?: Record<string, unknown> }).Runtimes ?? {},
);
const engineHasRuntime = (name: string) => engineRuntimes.includes(name);

interface Report {
  ok: boolean;
  checks: { name: string; status: string; detail: string; fix?: string }[];
}

describe("cordon doctor", () => {
  it("is green on a set-up machine, naming the engine and the current image", async () => {
    const run = await runCordon(["doctor", "--json"]);
    const report = JSON.parse(run.stdout) as Report;
    // Orphaned workspaces of whatever state directory this machine uses, and containers other
    // runs left of state directories since deleted, only warn.
    const leftovers = report.checks.filter((c) => c.name === "orphans" || c.name === "strays");
    expect(leftovers.map((c) => c.name)).toEqual(["orphans", "strays"]);
    for (const check of leftovers) expect(["ok", "warn"]).toContain(check.status);
    expect(
      report.checks.filter((c) => !leftovers.includes(c)).map((c) => [c.name, c.status]),
    ).toEqual([
      ["node", "ok"],
      ["docker", "ok"],
      ["engine", "ok"],
      ["image", "ok"],
      ["runtime", "ok"],
      // Support volumes no container mounts are only named (prune removes them): never a warning.
      ["support", "ok"],
      ["executor", "ok"],
      ["state", "ok"],
      ["disk", "ok"],
    ]);
    expect(run.exitCode).toBe(0);
    expect(report.checks.find((c) => c.name === "runtime")?.detail).toMatch(
      /^the engine's default \(runc\); registered: .*runc/,
    );
    expect(report.checks.find((c) => c.name === "docker")?.detail).toMatch(/API 1\.\d+/);
    expect(report.checks.find((c) => c.name === "engine")?.detail).toMatch(
      /^unix:\/\/\/var\/run\/docker\.sock, (the default local socket|from DOCKER_HOST); shares this host's filesystem$/,
    );
    // The disk check made, mounted and removed a real image: nothing of it is left behind.
    expect(report.checks.find((c) => c.name === "disk")?.detail).toMatch(
      /bounded by sandbox\.disk \(ext4 image made and loop-mounted in \d+ ms\)/,
    );
    expect(await readFile("/proc/self/mountinfo", "utf8")).not.toContain(".doctor-disk-");
  });

  it("warns of containers whose state directory is gone, naming it and the command that removes them", async () => {
    const image = await requireSandboxImage();
    const gone = await mkdtemp(path.join(tmpdir(), "cordon-gone-home-"));
    const kept = await mkdtemp(path.join(tmpdir(), "cordon-kept-home-"));
    const made = await Promise.all(
      [gone, kept].map((home) =>
        dockerClient().createContainer({
          Image: image,
          Cmd: ["true"],
          Labels: { ...testLabel, "cordon.home": home },
        }),
      ),
    );
    try {
      await rm(gone, { recursive: true });
      const report = JSON.parse((await runCordon(["doctor", "--json"])).stdout) as Report;
      const strays = report.checks.find((c) => c.name === "strays");
      expect(strays?.status).toBe("warn");
      expect(strays?.detail).toContain(`${gone} (1)`);
      expect(strays?.detail).not.toContain(kept);
      expect(strays?.fix).toMatch(/docker rm -f \$\(docker ps -aq --filter label=cordon\.home=/);
    } finally {
      await Promise.all(made.map((container) => container.remove({ force: true })));
      await rm(kept, { recursive: true, force: true });
    }
  });

  it("fails the runtime check with the setup command when the runtime asked for is not registered", async () => {
    const run = await runCordon(["doctor", "--json"], { CORDON_RUNTIME: "runsc-unregistered" });
    const report = JSON.parse(run.stdout) as Report;
    const runtime = report.checks.find((c) => c.name === "runtime");
    expect(run.exitCode).toBe(3);
    expect(runtime?.status).toBe("fail");
    expect(runtime?.detail).toMatch(/runsc-unregistered is not registered with the engine/);
    expect(runtime?.fix).toMatch(
      /cordon help gvisor.*CORDON_RUNTIME=runsc bash scripts\/setup\.sh/,
    );
  });

  // CI registers gVisor (CORDON_RUNTIME=runsc scripts/setup.sh); elsewhere this needs the same.
  it.runIf(engineHasRuntime("runsc"))(
    "with CORDON_RUNTIME=runsc starts a container under gVisor and names its platform and what its boundary is",
    async () => {
      const run = await runCordon(["doctor", "--json"], { CORDON_RUNTIME: "runsc" });
      const report = JSON.parse(run.stdout) as Report;
      const runtime = report.checks.find((c) => c.name === "runtime");
      expect(runtime?.status).toBe("ok");
      expect(runtime?.detail).toMatch(
        /^runsc runs containers \(platform: (ptrace|kvm)\); gVisor: .*seccomp profile is not applied/,
      );
      expect(run.exitCode).toBe(0);
    },
  );

  it("is red with a fix, exit 3, when no engine answers", async () => {
    const run = await runCordon(["doctor", "--json"], {
      DOCKER_HOST: "unix:///nonexistent/docker.sock",
    });
    const report = JSON.parse(run.stdout) as Report;
    const docker = report.checks.find((c) => c.name === "docker");
    expect(run.exitCode).toBe(3);
    expect(report.ok).toBe(false);
    expect(docker?.status).toBe("fail");
    expect(docker?.fix).toMatch(/cordon setup/);
    expect(report.checks.find((c) => c.name === "image")?.status).toBe("skipped");
  });

  it("prints a readable report on a terminal-less run", async () => {
    const run = await runCordon(["doctor"], { DOCKER_HOST: "unix:///nonexistent/docker.sock" });
    expect(run.stdout).toMatch(/FAIL\s+docker/);
    expect(run.stdout).toMatch(/fix: /);
    expect(run.stdout).toMatch(/some checks failed/);
  });

  it("reports an unwritable state directory with the variable to change", async () => {
    // A path below a regular file can never be created.
    const file = path.join(await mkdtemp(path.join(tmpdir(), "cordon-doctor-")), "file");
    await writeFile(file, "");
    const run = await runCordon(["doctor", "--json"], { CORDON_HOME: path.join(file, "state") });
    const report = JSON.parse(run.stdout) as Report;
    expect(report.checks.find((c) => c.name === "state")).toMatchObject({
      status: "fail",
      fix: expect.stringMatching(/CORDON_HOME/) as unknown,
    });
    expect(run.exitCode).toBe(3);
  });
});

describe("cordon setup", () => {
  it("on a set-up machine finds the image current, builds nothing and passes the checks", async () => {
    const run = await runCordon(["setup"]);
    expect(run.stderr).toMatch(/^Docker engine \S+ \(API 1\.\d+\)$/m);
    expect(run.stderr).toMatch(/cordon-sandbox:\w+ is current; nothing to build/);
    expect(run.stdout).toMatch(/^ok\s+image\s+cordon-sandbox:\w+ is current/m);
    expect(run.stdout).toMatch(/all checks passed/);
    expect(run.exitCode).toBe(0);
  });

  it("without an engine stops at the engine, exit 3, saying how to start one", async () => {
    const run = await runCordon(["setup"], { DOCKER_HOST: "unix:///nonexistent/docker.sock" });
    expect(run.exitCode).toBe(3);
    expect(run.stdout).toBe("");
    // The endpoint it tried, whichever way it was chosen.
    expect(run.stderr).toMatch(
      /cannot reach the Docker engine at unix:\/\/\/nonexistent\/docker\.sock /,
    );
    expect(run.stderr).toMatch(/fix: start the Docker engine/);
  });
});
