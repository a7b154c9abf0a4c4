/**
 * DESIGN.md §10 against a racing process: a carried tree's overlay is mounted (and unmounted) by
 * the host at a directory inside a private copy. A process that keeps swapping that directory, or
 * one above it, for a link to a host directory must never get the host to mount over, or unmount,
 * the directory the link names. Each case runs hundreds of mounts against a real racer and
 * requires that the race was really run: some attempts must have met the link.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import { afterEach, beforeEach, describe, expect, it } from "vitest";

import {
  diskBudgetSupport,
  mountOverlay,
  unmountAt,
} from "../../src/sandbox/workspace/disk-budget.js";
import { mountCountAt, parseMountPoints } from "../../src/sandbox/workspace/mount-table.js";

const run = promisify(execFile);
const support = await diskBudgetSupport();
const attempts = 400;

/**
 * A shell loop that swaps `name` (in `directory`) for a link to `victim` and back, forever, the
 * link in place a little longer than the directory (a mount by path would follow it often).
 */
function startRacer(directory: string, name: string, victim: string): ChildProcess {
  const script = `cd "$0" || exit 1
while :; do
  mv "$1" "$1.real" 2>/dev/null && ln -s "$2" "$1" && sleep 0.005 && rm "$1" && mv "$1.real" "$1"
done`;
  return spawn("bash", ["-c", script, directory, name, victim], { stdio: "ignore" });
}

describe.skipIf(!support.enforced)(
  "a carried tree's overlay against a process racing links into its path",
  { timeout: 240_000 },
  () => {
    let root: string;
    let copy: string;
    let victim: string;
    let racer: ChildProcess | undefined;
    const layers = () => ({
      lower: path.join(root, "lower"),
      upper: path.join(root, "upper"),
      work: path.join(root, "work"),
    });

    beforeEach(async () => {
      root = await mkdtemp(path.join(tmpdir(), "cordon-carry-race-"));
      copy = path.join(root, "copy");
      victim = path.join(root, "host");
      for (const directory of ["lower", "upper", "work", "copy", "host"]) {
        await mkdir(path.join(root, directory));
      }
      await writeFile(path.join(root, "lower", "from-snapshot"), "carried\n");
      await writeFile(path.join(victim, "host-file"), "the host's own\n");
    });

    afterEach(async () => {
      // Gone before cleaning up: a racer still running could move a mount out of the way.
      if (racer && racer.exitCode === null && racer.signalCode === null) {
        const exited = once(racer, "exit");
        racer.kill("SIGKILL");
        await exited;
      }
      racer = undefined;
      for (let round = 0; round < 10; round += 1) {
        const mounts = parseMountPoints(await readFile("/proc/self/mountinfo", "utf8"));
        const below = mounts.filter((point) => point.startsWith(`${root}/`)).reverse();
        if (below.length === 0) break;
        for (const point of below) await run("umount", ["-l", point]).catch(() => undefined);
      }
      await rm(root, { recursive: true, force: true });
    });

    it("the overlay lands on the copy's own directory or is refused; never on the directory a swapped-in link names", async () => {
      const target = path.join(copy, "node_modules");
      await mkdir(target);
      racer = startRacer(copy, "node_modules", victim);
      let mounted = 0;
      let refused = 0;
      for (let attempt = 0; attempt < attempts; attempt += 1) {
        try {
          await mountOverlay(target, layers());
          mounted += 1;
        } catch (error) {
          expect(String(error)).toMatch(/cannot mount an overlay/);
          refused += 1;
        }
        expect(await mountCountAt(victim)).toBe(0);
        await unmountAt(target);
      }
      expect(await readdir(victim)).toEqual(["host-file"]);
      // The race was run: both outcomes happened.
      expect(mounted).toBeGreaterThan(0);
      expect(refused).toBeGreaterThan(0);
    });

    it("an unmount never follows a link swapped in above the mount point to a host mount", async () => {
      // The host's own mount, at the path the link makes the copy's path lead to.
      const hostMount = path.join(victim, "node_modules");
      await mkdir(hostMount);
      await run("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", hostMount]);
      const target = path.join(copy, "pkg", "node_modules");
      await mkdir(target, { recursive: true });
      await mountOverlay(target, layers());
      racer = startRacer(copy, "pkg", victim);
      let unmounted = 0;
      let refused = 0;
      for (let attempt = 0; attempt < attempts; attempt += 1) {
        await unmountAt(target);
        expect(await mountCountAt(hostMount)).toBe(1);
        // Mounted again for the next attempt when the racer left the real directory in place.
        try {
          if ((await mountCountAt(target)) === 0) {
            await mountOverlay(target, layers());
            unmounted += 1;
          }
        } catch {
          // Refused: the link was in place. The next attempt tries again.
          refused += 1;
        }
      }
      expect(unmounted).toBeGreaterThan(0);
      expect(refused).toBeGreaterThan(0);
    });
  },
);
