import { describe, expect, it } from "vitest";

import { SandboxError } from "../../../common/index.js";
import { FakeContainerClient, engineError } from "../client/testing/fake-container-client.js";
import {
  WorkspaceInspectors,
  inspectorContainer,
  inspectorLabels,
  unreadablePaths,
  type InspectedWorkspace,
} from "./workspace-inspector.js";

const target: InspectedWorkspace = {
  sandboxName: "cordon-s",
  workspace: "/state/workspaces/cordon-s",
  baselineGitDir: "/state/workspaces/.cordon-s.baseline.git",
  image: "cordon-sandbox:test",
  user: "1000:1000",
};

describe("the inspector container", () => {
  it("is hardened: no network, read-only root and mounts, no capabilities, non-root, bounded, and ends by itself", () => {
    const request = inspectorContainer("cordon-s-inspect-1", target, { timeoutMs: 60_000 });
    const host = request.HostConfig;
    expect(request.NetworkDisabled).toBe(true);
    expect(host.NetworkMode).toBe("none");
    expect(host.ReadonlyRootfs).toBe(true);
    expect(host.CapDrop).toEqual(["ALL"]);
    expect(host.SecurityOpt).toEqual(["no-new-privileges:true"]);
    expect(host.Privileged).toBe(false);
    expect(request.User).toBe("1000:1000");
    expect(host.Mounts).toEqual([
      { Type: "bind", Source: target.workspace, Target: "/workspace", ReadOnly: true },
      { Type: "bind", Source: target.baselineGitDir, Target: "/baseline", ReadOnly: true },
    ]);
    expect(host.Tmpfs?.["/scratch"]).toMatch(/noexec.*uid=1000,gid=1000,mode=0700/);
    expect(host.PidsLimit).toBeGreaterThan(0);
    expect(host.Memory).toBeGreaterThan(0);
    // Its only process ends a minute after a spare's wait and a whole inspection could, and the
    // engine then removes it.
    expect([...(request.Entrypoint ?? []), ...(request.Cmd ?? [])]).toEqual(["sleep", "150"]);
    expect(host.AutoRemove).toBe(true);
    expect(request.Labels?.[inspectorLabels.sandbox]).toBe("cordon-s");
  });

  it("mounts the checkpoint store writable only to record or restore, and the copy writable only to restore", () => {
    const withStore = {
      ...target,
      checkpointStore: "/state/workspaces/.cordon-s.baseline.git/checkpoints",
      forkTarget: "/state/workspaces/cordon-f",
    };
    const mounts = (access: "read" | "record" | "restore" | "compare" | "fork") =>
      inspectorContainer("n", withStore, { timeoutMs: 1000, access }).HostConfig.Mounts?.map(
        (mount) => `${mount.Target}:${mount.ReadOnly ? "ro" : "rw"}`,
      );
    expect(mounts("read")).toEqual(["/workspace:ro", "/baseline:ro"]);
    expect(mounts("record")).toEqual(["/workspace:ro", "/baseline:ro", "/checkpoints:rw"]);
    expect(mounts("restore")).toEqual(["/workspace:rw", "/baseline:ro", "/checkpoints:rw"]);
    expect(() => inspectorContainer("n", target, { timeoutMs: 1000, access: "record" })).toThrow(
      /checkpoint store/,
    );
    // Counting the changes between stored states needs neither the copy nor a writable store.
    expect(mounts("compare")).toEqual(["/baseline:ro", "/checkpoints:ro"]);
    expect(() => inspectorContainer("n", target, { timeoutMs: 1000, access: "compare" })).toThrow(
      /checkpoint store/,
    );
    // A fork's copier writes only the fork's copy: the parent's and the store stay out of reach.
    expect(mounts("fork")).toEqual(["/workspace:ro", "/baseline:ro", "/fork:rw"]);
    expect(() => inspectorContainer("n", target, { timeoutMs: 1000, access: "fork" })).toThrow(
      /fork into/,
    );
    // A recorder that runs cordon's executor gets its binary read-only, as the sandbox does.
    const withExecutor = {
      timeoutMs: 1000,
      access: "record" as const,
      executorVolume: "cordon-executor-data",
    };
    expect(
      inspectorContainer("n", withStore, withExecutor).HostConfig.Mounts?.map(
        (mount) => `${mount.Type} ${mount.Source} ${mount.Target}:${mount.ReadOnly ? "ro" : "rw"}`,
      ),
    ).toContain("volume cordon-executor-data /.cordon:ro");
  });

  it("forks a copy in volumes into the fork's workspace volume, its only writable mount", () => {
    const inVolumes = {
      ...target,
      volumes: {
        workspace: "cordon-s-workspace",
        baseline: "cordon-s-baseline",
        checkpoints: "cordon-s-checkpoints",
      },
      forkTarget: "cordon-f-workspace",
    };
    const mounts = inspectorContainer("n", inVolumes, {
      timeoutMs: 1000,
      access: "fork",
    }).HostConfig.Mounts?.map(
      (mount) => `${mount.Type} ${mount.Source} ${mount.Target}:${mount.ReadOnly ? "ro" : "rw"}`,
    );
    expect(mounts).toEqual([
      "volume cordon-s-workspace /workspace:ro",
      "volume cordon-s-baseline /baseline:ro",
      "volume cordon-f-workspace /fork:rw",
    ]);
  });

  it("runs only the modes of its access, with a tree id for an operand", async () => {
    const fake = new FakeContainerClient();
    const inspectors = new WorkspaceInspectors({ containers: fake });
    const withStore = { ...target, checkpointStore: "/store" };
    const reader = await inspectors.start(withStore);
    expect(() => reader.run({ mode: "restore", pathspecs: new Uint8Array() })).toThrow(
      /made to read, not to restore/,
    );
    for (const operand of ["--upload-pack=touch /x", "../x", "HEAD", "-", "a".repeat(39)]) {
      const restorer = await inspectors.start(withStore, { access: "restore" });
      await expect(
        restorer.run({ mode: "restore", operand, pathspecs: new Uint8Array() }),
      ).rejects.toThrow(/not a checkpoint's tree id/);
    }
  });

  it("refuses a sandbox user that is a name, not uid:gid", () => {
    expect(() =>
      inspectorContainer("n", { ...target, user: "sandbox" }, { timeoutMs: 1000 }),
    ).toThrow(SandboxError);
  });

  it("starts a second, new container when the engine fails a start with its own 500", async () => {
    const fake = new FakeContainerClient();
    let starts = 0;
    fake.before.start = () => {
      starts += 1;
      if (starts === 1) throw engineError(500, "failed to create shim task");
    };
    const inspectors = new WorkspaceInspectors({ containers: fake });
    const inspector = await inspectors.start(target);
    expect(starts).toBe(2);
    // The failed one was removed; one inspector is left, and removing it leaves none.
    expect([...fake.containers.values()]).toHaveLength(1);
    await inspector.remove();
    expect([...fake.containers.values()]).toHaveLength(0);
  });

  it("does not retry what a second try cannot fix (a missing image: 404)", async () => {
    const fake = new FakeContainerClient();
    fake.before.start = () => {
      throw engineError(404, "No such image");
    };
    await expect(new WorkspaceInspectors({ containers: fake }).start(target)).rejects.toThrow();
    expect(fake.methods().filter((method) => method === "start")).toHaveLength(1);
    expect([...fake.containers.values()]).toHaveLength(0);
  });
});

describe("unreadablePaths", () => {
  it("takes the files and directories git could not read, once each", () => {
    const stderr = [
      "warning: could not open directory 'secret/': Permission denied",
      'error: open("lib/cart.js"): Permission denied',
      'error: open("lib/cart.js"): Permission denied',
      "error: unable to index file 'lib/cart.js'",
      "fatal: updating files failed",
    ].join("\n");
    expect(unreadablePaths(stderr)).toEqual(["secret/", "lib/cart.js"]);
  });

  it("finds none in other failures", () => {
    expect(unreadablePaths("fatal: not a git repository")).toEqual([]);
  });
});
