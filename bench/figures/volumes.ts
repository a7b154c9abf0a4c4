import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import {
  WorkspaceInspectors,
  baselineGitDir,
  dockerWorkspaceChanges,
  workspaceVolumeNames,
  type SandboxSpec,
} from "../../src/sandbox/index.js";
import type { BenchContext } from "../context.js";
import { compare, timeInTurns } from "../measure.js";
import { withTarget, type FigureComparison, type FigureResult } from "../report.js";
import { FailureCount, execOk } from "./failures.js";
import { newSessionAndExec } from "./new-session.js";
import { makeRepository, repositoryFiles } from "./seeded-session.js";

/** Issue 29's budget: a copy kept in engine volumes against today's copy on this host. */
const budget = 1.2;
const changedFiles = 10;
const hostBaseline = 'the same with the copy on this host (sandbox.workspaceStorage "host")';

type Storage = "host" | "volume";
const storages: readonly Storage[] = ["host", "volume"];

/**
 * Issue 29, item 6: the local engine with the private copy in Docker volumes
 * (`sandbox.workspaceStorage: "volume"`), beside the same operations with today's copy on this
 * host, in turns in one run: a new seeded session (seed, create, start, `exec true`), a warm
 * `exec true`, a 1 KiB write + read, and `cordon diff` of 10 changed files (an inspector started
 * cold, the sandbox frozen). Each is held to 1.2 × the host copy's time.
 */
export async function volumesFigure(ctx: BenchContext): Promise<FigureResult> {
  const runs = ctx.quick ? 2 : 8;
  const fastRuns = ctx.quick ? 8 : 40;
  const failures = new FailureCount();
  const root = await mkdtemp(path.join(tmpdir(), "cordon-bench-volumes-"));
  const made: string[] = [];
  const specOf = async (name: string, storage: Storage): Promise<SandboxSpec> => {
    const spec = await ctx.spec(`${name}-${storage}`);
    made.push(spec.containerName);
    return {
      ...spec,
      seed: true,
      agentWorkspace: path.join(root, "repo"),
      workspaceStorage: storage,
    };
  };
  try {
    const repository = path.join(root, "repo");
    await mkdir(repository);
    await makeRepository(repository);

    ctx.progress(
      `volumes: ${runs} new seeded sessions each with the copy on the host and in volumes`,
    );
    const sessions: Record<Storage, SandboxSpec[]> = { host: [], volume: [] };
    for (const storage of storages) {
      for (let index = 0; index <= runs; index += 1) {
        sessions[storage].push(await specOf(`volumes-new-${index}`, storage));
      }
    }
    const newSession = (storage: Storage) => (run: number) => {
      const spec = sessions[storage][run + 1];
      if (!spec) throw new Error(`no spec for run ${run}`);
      return failures.guard(() => newSessionAndExec(ctx, spec));
    };
    const seeded = await timeInTurns(
      { host: newSession("host"), volume: newSession("volume") },
      runs,
      1,
    );

    // One warm sandbox of each kind, with 10 files changed, for the rest.
    const warmSpecs = {
      host: await specOf("volumes-warm", "host"),
      volume: await specOf("volumes-warm", "volume"),
    };
    const leases = {
      host: await ctx.manager.acquire(warmSpecs.host, { signal: ctx.signal }),
      volume: await ctx.manager.acquire(warmSpecs.volume, { signal: ctx.signal }),
    };
    try {
      for (const storage of storages) {
        for (let index = 0; index < changedFiles; index += 1) {
          await leases[storage].sandbox.files.writeFile(
            `/workspace/src/module${index}/file0.ts`,
            `// changed by the bench ${index}\n`,
          );
        }
      }
      ctx.progress(`volumes: ${fastRuns} warm execs and 1 KiB write + read each`);
      const exec = (storage: Storage) => () =>
        failures.guard(() => execOk(leases[storage].sandbox, "true", ctx.signal));
      const warm = await timeInTurns({ host: exec("host"), volume: exec("volume") }, fastRuns, 3);
      const bytes = new Uint8Array(randomBytes(1024));
      const roundTrip = (storage: Storage) => () =>
        failures.guard(async () => {
          const sandbox = leases[storage].sandbox;
          const file = `${sandbox.workdir}/bench-volumes.bin`;
          await sandbox.files.writeFile(file, bytes, { signal: ctx.signal });
          const back = await sandbox.files.readFile(file, { signal: ctx.signal });
          if (!Buffer.from(back).equals(Buffer.from(bytes)))
            throw new Error("read back other bytes");
        });
      const small = await timeInTurns(
        { host: roundTrip("host"), volume: roundTrip("volume") },
        fastRuns,
        2,
      );

      ctx.progress(`volumes: ${runs} cold diffs each of ${changedFiles} changed files`);
      const patches: Record<Storage, number> = { host: 0, volume: 0 };
      // A reader of its own per run, as `cordon diff` makes one: no spare inspector waiting.
      const diff = (storage: Storage) => () =>
        failures.guard(async () => {
          const lease = leases[storage];
          const copy = lease.privateWorkspace ?? "";
          const name = lease.containerName;
          const reader = dockerWorkspaceChanges({
            inspectors: new WorkspaceInspectors({ containers: ctx.engine.containers }),
            target: {
              sandboxName: name,
              workspace: copy,
              baselineGitDir: baselineGitDir(copy),
              image: ctx.image,
              user: warmSpecs[storage].docker.user,
              ...(storage === "volume" ? { volumes: workspaceVolumeNames(name) } : {}),
            },
            freeze: (fn) => lease.freeze(fn),
          });
          patches[storage] = (await reader.patch()).byteLength;
          return () => reader.dispose();
        });
      const diffs = await timeInTurns({ host: diff("host"), volume: diff("volume") }, runs, 1);
      if (patches.host === 0 || patches.host !== patches.volume) failures.count += 1;

      const held = (measures: string, timings: typeof seeded): FigureComparison =>
        withTarget({ measures, ...compare(timings.volume, timings.host, hostBaseline) }, budget);
      return {
        name: "volumes",
        title: "the private copy in engine volumes against the copy on this host (local engine)",
        comparisons: [
          held(`seed a ${repositoryFiles}-file repository + new session + exec true`, seeded),
          held("warm exec true", warm),
          held("1 KiB write + read", small),
          held(`cordon diff of ${changedFiles} changed files (inspector cold)`, diffs),
        ],
        failures: failures.count,
        details: {
          runs,
          fastRuns,
          patchBytesHost: patches.host,
          patchBytesVolume: patches.volume,
          ...failures.details(),
        },
      };
    } finally {
      await leases.host.release();
      await leases.volume.release();
    }
  } finally {
    for (const name of made)
      await ctx.inventory.remove(name, { discardChanges: true }).catch(() => undefined);
    await rm(root, { recursive: true, force: true });
  }
}
