/**
 * An inspector container whose process ended between creating and starting it (killed, or its
 * stdout closed under `cordon diff | head`) is never removed by itself — AutoRemove acts only once
 * a container has run. Prune finds such containers of its own state directory, against the real engine.
 */
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import {
  DockerEngine,
  SandboxInventory,
  inspectorLabels,
  type PruneReport,
} from "../../src/sandbox/index.js";
import { dockerClient, removeContainersOfHome, requireSandboxImage } from "../support/docker.js";
import { removeStateDirectory } from "../support/state-directory.js";

describe("prune and inspectors never started", () => {
  let home: string;
  let otherHome: string;
  const suffix = `${process.pid}-${Date.now().toString(36)}`;

  /** A container labelled as an inspector of `home`, as the inspector makes it. */
  async function inspector(name: string, stateDirectory: string, start: boolean): Promise<string> {
    const container = await dockerClient().createContainer({
      name: `${name}-${suffix}`,
      Image: await requireSandboxImage(),
      Entrypoint: ["sleep"],
      Cmd: ["600"],
      Labels: {
        [inspectorLabels.sandbox]: `cordon-${name}`,
        [inspectorLabels.home]: stateDirectory,
      },
      HostConfig: { NetworkMode: "none" },
    });
    if (start) await container.start();
    return container.id;
  }

  const exists = (id: string): Promise<boolean> =>
    dockerClient()
      .getContainer(id)
      .inspect()
      .then(
        () => true,
        () => false,
      );

  beforeAll(async () => {
    home = await mkdtemp(path.join(tmpdir(), "cordon-inspector-leftovers-"));
    otherHome = await mkdtemp(path.join(tmpdir(), "cordon-inspector-other-"));
  });

  afterAll(async () => {
    await removeContainersOfHome(home);
    await removeContainersOfHome(otherHome);
    await removeStateDirectory(home);
    await removeStateDirectory(otherHome);
  });

  it("removes this state directory's unstarted inspectors, after a dry run that removes nothing", async () => {
    const unstarted = await inspector("unstarted", home, false);
    const running = await inspector("running", home, true);
    const elsewhere = await inspector("elsewhere", otherHome, false);
    const inventory = new SandboxInventory({ engine: new DockerEngine(), stateDirectory: home });
    // What prune says of inspectors: other tests' support volumes on the engine may be swept too.
    const inspectors = (report: PruneReport) =>
      report.orphans.filter((orphan) => orphan.reason.includes("inspector"));

    // Young ones may be about to be started by another process: the grace keeps them.
    expect(inspectors(await inventory.prune({ dryRun: true }))).toEqual([]);
    // The grace is the test's to skip.
    const dry = await inventory.prune({ dryRun: true, orphanMinAgeMs: 0 });
    expect(inspectors(dry)).toEqual([
      { path: `unstarted-${suffix}`, reason: "inspector of cordon-unstarted, never started" },
    ]);
    expect(await exists(unstarted)).toBe(true);

    const report = await inventory.prune({ orphanMinAgeMs: 0 });
    expect(inspectors(report).map((orphan) => orphan.path)).toEqual([`unstarted-${suffix}`]);
    expect(await exists(unstarted)).toBe(false);
    expect(await exists(running)).toBe(true);
    expect(await exists(elsewhere)).toBe(true);
  }, 120_000);
});
