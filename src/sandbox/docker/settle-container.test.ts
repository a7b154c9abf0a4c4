import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os, { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, describe, expect, it } from "vitest";

import { testSandboxSpec } from "../../../test/support/sandbox-spec.js";
import {
  AbortedError,
  SandboxError,
  SandboxStartError,
  createSilentLogger,
  sleep,
} from "../../common/index.js";
import type { SandboxSpec } from "../spec.js";
import {
  FakeContainerClient,
  createdState,
  exitedState,
  runningState,
  type FakeContainer,
} from "./client/testing/fake-container-client.js";
import { createContainerOptions, labelKeys } from "./container-options.js";
import type { ResolvedImage } from "./manager-image.js";
import { freezeMarkerFile, readFreezeMarker } from "./freeze-marker.js";
import { holdFreezeUntilReleased } from "./testing/held-freeze.js";
import { settleContainer, type SettleOptions } from "./settle-container.js";

// A real directory: a paused container's freeze marker is looked for in it.
const stateDirectory = mkdtempSync(path.join(tmpdir(), "cordon-settle-unit-"));
afterAll(() => rmSync(stateDirectory, { recursive: true, force: true }));
const image: ResolvedImage = { reference: "cordon-sandbox:test", id: "sha256:1111aaaa2222bbbb" };

/** A fake engine that knows the image, and a spec whose container it has never seen. */
function setup(specOverrides: Partial<SandboxSpec> = {}) {
  const client = new FakeContainerClient();
  client.imageIds.set(image.reference, image.id);
  const spec = testSandboxSpec("settle", { spec: specOverrides });
  return { client, spec };
}

/** What the manager would have created for `spec` (the production options builder). */
function existing(
  client: FakeContainerClient,
  spec: SandboxSpec,
  change: Partial<FakeContainer> = {},
): FakeContainer {
  const request = createContainerOptions({
    spec,
    image: image.reference,
    createdAt: "2026-01-01T00:00:00.000Z",
    stateDirectory,
  });
  return client.add({
    name: spec.containerName,
    image: image.reference,
    imageId: image.id,
    labels: { ...request.Labels },
    ...change,
  });
}

async function settle(
  client: FakeContainerClient,
  spec: SandboxSpec,
  options: Partial<SettleOptions> = {},
) {
  const progress: string[] = [];
  const counts = { replaced: 0, egress: 0 };
  const result = await settleContainer({
    containers: client,
    spec,
    image,
    stateDirectory,
    createRequest: () =>
      Promise.resolve(
        createContainerOptions({
          spec,
          image: image.reference,
          createdAt: new Date().toISOString(),
          stateDirectory,
        }),
      ),
    held: () => false,
    beforeReplace: () => {
      counts.replaced += 1;
      return Promise.resolve();
    },
    ensureEgress: () => {
      counts.egress += 1;
      return Promise.resolve();
    },
    progress: (phase, message) => progress.push(`${phase}: ${message}`),
    log: createSilentLogger(),
    retryDelayMs: 1,
    ...options,
  });
  return { result, progress, counts };
}

/** The one container the fake engine has under the spec's name. */
function only(client: FakeContainerClient, spec: SandboxSpec): FakeContainer {
  const named = [...client.containers.values()].filter((c) => c.name === spec.containerName);
  expect(named).toHaveLength(1);
  return named[0]!;
}

describe("settleContainer", () => {
  it("creates and starts an absent container from the production options, its proxy first", async () => {
    const { client, spec } = setup();
    const { result, counts } = await settle(client, spec);
    expect(result.fresh).toBe(true);
    expect(result.stale).toBe(false);
    expect(result.container.state.running).toBe(true);
    expect(client.methods()).toEqual(["inspect", "create", "start", "inspect"]);
    expect(counts.egress).toBe(1);
    const made = only(client, spec);
    expect(made.labels[labelKeys.managed]).toBe("true");
    expect(made.labels[labelKeys.home]).toBe(stateDirectory);
    expect(made.request?.HostConfig.CapDrop).toEqual(["ALL"]);
  });

  it("on a name conflict (409) uses the container another process created meanwhile", async () => {
    const { client, spec } = setup();
    let theirs: FakeContainer | undefined;
    client.before.create = () => {
      theirs ??= existing(client, spec);
    };
    const { result } = await settle(client, spec);
    expect(result.fresh).toBe(false);
    expect(result.container.id).toBe(theirs?.id);
    expect(only(client, spec).id).toBe(theirs?.id);
    expect(client.methods()).not.toContain("remove");
  });

  it("reuses a running container of the same config and image, and makes sure of its proxy", async () => {
    const { client, spec } = setup({
      egress: {
        allow: ["registry.npmjs.org"],
        proxyContainer: "cordon-proxy",
        proxyPort: 3128,
      },
    });
    const container = existing(client, spec);
    const { result, progress, counts } = await settle(client, spec);
    expect(result).toMatchObject({ fresh: false, stale: false });
    expect(result.container.id).toBe(container.id);
    expect(counts.egress).toBe(1);
    expect(progress.at(-1)).toMatch(/^reuse: reusing /);
    expect(client.methods()).toEqual(["inspect"]);
  });

  it("resumes a paused container", async () => {
    const { client, spec } = setup();
    const container = existing(client, spec, {
      state: { ...runningState(), status: "paused", paused: true },
    });
    const { result } = await settle(client, spec);
    expect(result.container.id).toBe(container.id);
    // No freeze marker: no cordon command is reading it, so the pause was left behind.
    expect(client.methods()).toEqual(["inspect", "inspect", "unpause", "inspect"]);
  });

  it("waits for a container another command holds frozen (its marker), and never resumes it", async () => {
    const { client, spec } = setup();
    const container = existing(client, spec, {
      state: { ...runningState(), status: "paused", paused: true },
    });
    // The other command (a rollback of another session): its marker, then its pause.
    const rollback = await holdFreezeUntilReleased(stateDirectory, spec.containerName, () =>
      client.unpause(container.id),
    );
    const progress: string[] = [];
    const settling = settle(client, spec, {
      progress: (phase, message) => progress.push(`${phase}: ${message}`),
      freezeWait: { announceAfterMs: 0, pollMs: 5 },
    });
    while (progress.length === 0) await sleep(5);
    expect(progress[0]).toMatch(
      new RegExp(
        `^wait: waiting for .*pid ${process.pid}.*, which has ${spec.containerName} frozen`,
      ),
    );
    expect(client.methods()).not.toContain("unpause");
    expect(container.state.paused).toBe(true);
    await rollback.release();
    const { result } = await settling;
    expect(result.container.id).toBe(container.id);
    // Resumed once, by its holder.
    expect(client.methods().filter((method) => method === "unpause")).toHaveLength(1);
  });

  it("resumes a container whose freezer died (a stale marker), and removes the marker", async () => {
    const { client, spec } = setup();
    const container = existing(client, spec, {
      state: { ...runningState(), status: "paused", paused: true },
    });
    const marker = freezeMarkerFile(stateDirectory, spec.containerName);
    mkdirSync(path.dirname(marker), { recursive: true });
    const exited = spawnSync(process.execPath, ["-e", ""]);
    writeFileSync(
      marker,
      JSON.stringify({
        v: 1,
        pid: exited.pid,
        host: os.hostname(),
        startTicks: 1,
        token: "killed-rollback",
        command: "cordon rollback",
        since: "2026-01-01T00:00:00.000Z",
      }),
    );
    const { result, progress } = await settle(client, spec, { freezeWait: { boundMs: 0 } });
    expect(result.container.id).toBe(container.id);
    expect(result.container.state.paused).toBe(false);
    expect(progress.filter((line) => line.startsWith("wait:"))).toEqual([]);
    expect(await readFreezeMarker(stateDirectory, spec.containerName)).toBeUndefined();
  });

  it("gives up on a freeze held past the bound, naming its holder, and leaves it paused", async () => {
    const { client, spec } = setup();
    const container = existing(client, spec, {
      state: { ...runningState(), status: "paused", paused: true },
    });
    const stuck = await holdFreezeUntilReleased(stateDirectory, spec.containerName);
    const error = await settle(client, spec, { freezeWait: { boundMs: 20, pollMs: 5 } }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(SandboxError);
    expect((error as SandboxError).fix).toMatch(new RegExp(`kill ${process.pid}`));
    expect(container.state.paused).toBe(true);
    await stuck.release();
  });

  it.each([0, 143])(
    "starts a container stopped on purpose (exit %i) in place, keeping it",
    async (exitCode) => {
      const { client, spec } = setup();
      const container = existing(client, spec, { state: exitedState(exitCode) });
      const { result, counts } = await settle(client, spec);
      expect(result).toMatchObject({ fresh: false, stale: false });
      expect(result.container.id).toBe(container.id);
      expect(client.methods()).toEqual(["inspect", "start", "inspect"]);
      expect(counts.replaced).toBe(0);
    },
  );

  it("replaces a killed container (exit 137) with a fresh one", async () => {
    const { client, spec } = setup();
    const dead = existing(client, spec, { state: exitedState(137) });
    const { result, progress, counts } = await settle(client, spec);
    expect(result.fresh).toBe(true);
    expect(result.container.id).not.toBe(dead.id);
    expect(client.find(dead.id)).toBeUndefined();
    expect(counts.replaced).toBe(1);
    expect(progress).toContain(
      `create: ${spec.containerName} exited with code 137; replacing it with a fresh container`,
    );
    // Never started in place: removed, then a new one is created and started.
    expect(client.methods()).toEqual([
      "inspect",
      "remove",
      "inspect",
      "create",
      "start",
      "inspect",
    ]);
  });

  it("replaces an OOM-killed container, whatever its exit code, and says why", async () => {
    const { client, spec } = setup();
    const dead = existing(client, spec, { state: exitedState(0, { oomKilled: true }) });
    const { result, progress } = await settle(client, spec);
    expect(result.fresh).toBe(true);
    expect(client.find(dead.id)).toBeUndefined();
    expect(progress).toContain(
      `create: ${spec.containerName} was killed for memory; replacing it with a fresh container`,
    );
  });

  it("replaces a stopped container that does not start again", async () => {
    const { client, spec } = setup();
    const broken = existing(client, spec, {
      state: exitedState(0),
      startFailure: "OCI runtime create failed",
    });
    const { result } = await settle(client, spec);
    expect(result.fresh).toBe(true);
    expect(client.find(broken.id)).toBeUndefined();
    expect(only(client, spec).state.running).toBe(true);
  });

  it("keeps a drifted container that commands run in, and reports it stale", async () => {
    const { client, spec } = setup();
    const busy = existing(client, spec, {
      processes: ["/sbin/docker-init -- sleep infinity", "sleep infinity", "bash -c make"],
    });
    const { result, counts } = await settle(client, { ...spec, configHash: "v2" });
    expect(result).toMatchObject({ fresh: false, stale: true });
    expect(result.container.id).toBe(busy.id);
    expect(client.methods()).toEqual(["inspect", "processes"]);
    expect(counts.replaced).toBe(0);
  });

  it("keeps a drifted container this process holds, without asking what runs in it", async () => {
    const { client, spec } = setup();
    existing(client, spec);
    const { result } = await settle(client, { ...spec, configHash: "v2" }, { held: () => true });
    expect(result.stale).toBe(true);
    expect(client.methods()).toEqual(["inspect"]);
  });

  it("recreates an idle drifted container with the new config", async () => {
    const { client, spec } = setup();
    const old = existing(client, spec);
    const { result, progress } = await settle(client, { ...spec, configHash: "v2" });
    expect(result).toMatchObject({ fresh: true, stale: false });
    expect(client.find(old.id)).toBeUndefined();
    expect(only(client, spec).labels[labelKeys.configHash]).toBe("v2");
    expect(progress).toContain(
      `create: ${spec.containerName} was made from config test (now v2); recreating it`,
    );
  });

  it("recreates an idle container whose tag now names another image", async () => {
    const { client, spec } = setup();
    const old = existing(client, spec, { imageId: "sha256:9999oldbuild0000" });
    const { result } = await settle(client, spec);
    expect(result.fresh).toBe(true);
    expect(client.find(old.id)).toBeUndefined();
    expect(result.container.imageId).toBe(image.id);
  });

  it("refuses a container with its name that cordon did not create, and leaves it alone", async () => {
    const { client, spec } = setup();
    const foreign = client.add({ name: spec.containerName, labels: { maintainer: "someone" } });
    const error = await settle(client, spec).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxStartError);
    expect((error as SandboxStartError).message).toContain("cordon did not create it");
    expect((error as SandboxStartError).fix).toContain(`docker rm -f ${spec.containerName}`);
    expect(client.find(foreign.id)).toBeDefined();
    expect(client.methods()).toEqual(["inspect"]);
  });

  it.each([
    ["scope key", { [labelKeys.scopeKey]: "session:other" }, /scope key session:other/],
    ["state directory", { [labelKeys.home]: "/elsewhere" }, /state directory \/elsewhere/],
  ])(
    "refuses cordon's container made for another %s, and leaves it alone",
    async (_what, labels, detail) => {
      const { client, spec } = setup();
      const other = existing(client, spec);
      Object.assign(other.labels, labels);
      const error = await settle(client, spec).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SandboxStartError);
      expect((error as Error).message).toMatch(/made by cordon for something else/);
      expect((error as Error).message).toMatch(detail);
      expect(client.find(other.id)).toBeDefined();
      expect(client.methods()).toEqual(["inspect"]);
    },
  );

  it("waits for a container someone else is removing, then creates its own", async () => {
    const { client, spec } = setup();
    const going = existing(client, spec, { state: { ...exitedState(137), status: "removing" } });
    let inspects = 0;
    client.before.inspect = () => {
      // The other removal finishes after cordon looked twice.
      if (++inspects === 3) client.containers.delete(going.id);
    };
    const { result } = await settle(client, spec);
    expect(result.fresh).toBe(true);
    expect(client.methods().slice(0, 4)).toEqual(["inspect", "inspect", "inspect", "create"]);
    expect(client.methods()).not.toContain("remove");
  });

  it("gives up on a container that never settles, naming the way out", async () => {
    const { client, spec } = setup();
    existing(client, spec, {
      state: { ...runningState(), restarting: true, status: "restarting" },
    });
    const error = await settle(client, spec).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxStartError);
    expect((error as SandboxStartError).fix).toContain(`cordon sandbox rm ${spec.containerName}`);
  });

  it("removes a fresh container that fails to start and reports the engine's reason", async () => {
    const { client, spec } = setup();
    client.before.start = (id) => {
      const made = client.find(id as string);
      if (made) made.startFailure = "error mounting tmpfs";
    };
    const error = await settle(client, spec).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxStartError);
    expect((error as Error).message).toContain(`start the sandbox container ${spec.containerName}`);
    expect((error as Error).message).toContain("error mounting tmpfs");
    expect(client.find(spec.containerName)).toBeUndefined();
  });

  it("does nothing once aborted", async () => {
    const { client, spec } = setup();
    const controller = new AbortController();
    controller.abort();
    await expect(settle(client, spec, { signal: controller.signal })).rejects.toThrow(AbortedError);
    expect(client.calls).toEqual([]);
  });

  it("waits while another process's start of a created container is under way", async () => {
    const { client, spec } = setup();
    // The engine answers our start at once, but reads "created" until their start has finished.
    const theirs = existing(client, spec, { state: createdState(), afterStart: createdState() });
    let inspects = 0;
    client.before.inspect = () => {
      if (++inspects === 3) theirs.state = runningState();
    };
    const { result } = await settle(client, spec);
    expect(result.container.id).toBe(theirs.id);
    expect(client.methods()).toEqual(["inspect", "start", "inspect", "inspect"]);
  });
});
