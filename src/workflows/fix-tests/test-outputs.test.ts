import { describe, expect, it } from "vitest";

import type { ChangesSource } from "../../changes/index.js";
import type { WorkspaceChanges } from "../../sandbox/index.js";
import {
  createdDirectories,
  filesWrittenBetween,
  learnTestOutputs,
  testOutputs,
  watchFilesWritten,
} from "./test-outputs.js";

describe("filesWrittenBetween", () => {
  it("names files created, rewritten or deleted, not those a step before left as they were", () => {
    const before = new Map([
      ["setup.log", "100644 aaa"],
      ["build/calc.o", "100644 bbb"],
      ["tmp/stale", "100644 ccc"],
    ]);
    const after = new Map([
      ["setup.log", "100644 aaa"],
      ["build/calc.o", "100644 ddd"],
      ["build/test_calc", "100755 eee"],
      ["tmp/stale", "deleted"],
    ]);
    expect(filesWrittenBetween(before, after)).toEqual([
      "build/calc.o",
      "build/test_calc",
      "tmp/stale",
    ]);
  });

  it("names a file put back to its seeded content (it drops out of the list)", () => {
    expect(filesWrittenBetween(new Map([["cache.db", "100644 aaa"]]), new Map())).toEqual([
      "cache.db",
    ]);
  });
});

/** A CMake project's first build into `_build`, which .gitignore does not name. */
const cmakeFirstBuild = new Map([
  ["_build/CMakeCache.txt", "100644 a1"],
  ["_build/CMakeFiles/semver.dir/src/semver.c.o", "100644 a2"],
  ["_build/tests/CMakeFiles/test_semver.dir/test_semver.c.o", "100644 a3"],
  ["_build/tests/test_semver", "100755 a4"],
  ["src/__pycache__/gen.cpython-311.pyc", "100644 a5"],
]);
const seeded = new Set(["include", "include/semver", "src", "tests"]);

describe("createdDirectories", () => {
  it("names the outermost directory the seeded copy did not have, wherever the build nests", () => {
    expect(
      createdDirectories({
        before: new Map(),
        after: cmakeFirstBuild,
        baselineDirectories: seeded,
      }),
    ).toEqual(["_build", "src/__pycache__"]);
  });

  it("a directory a step before the run wrote into (a setup's) is not the command's", () => {
    const before = new Map([["vendor/lib/dep.h", "100644 s1"]]);
    const after = new Map([...before, ["vendor/lib/dep.o", "100644 s2"], ["vendor/obj/x.o", "1"]]);
    expect(createdDirectories({ before, after, baselineDirectories: seeded })).toEqual([
      "vendor/obj",
    ]);
  });

  it("a file the run deleted creates nothing; top-level files are not directories", () => {
    const after = new Map([
      ["tests/old_fixture.txt", "deleted"],
      ["CMakeCache.txt", "100644 b1"],
    ]);
    expect(createdDirectories({ before: new Map(), after, baselineDirectories: seeded })).toEqual(
      [],
    );
  });
});

describe("testOutputs", () => {
  it("lists created directories as `dir/` and only the files outside them, nested ones once", () => {
    expect(
      testOutputs(
        ["CMakeCache.txt", "_build/a.o", "_build/sub/b.o", "tests/Makefile"],
        ["_build/sub", "_build"],
      ),
    ).toEqual(["CMakeCache.txt", "_build/", "tests/Makefile"]);
  });
});

const none = (): Map<string, string> => new Map();

/** A reader of a copy's changes that replays the listings a real inspector would print. */
function scriptedCopy(
  listings: Map<string, string>[],
  baseline: Set<string>,
): ChangesSource & { reads: string[] } {
  const reads: string[] = [];
  const changes: WorkspaceChanges = {
    patch: () => Promise.reject(new Error("not used")),
    changedFiles: () => {
      reads.push("changed-files");
      const next = listings.shift();
      return next ? Promise.resolve(next) : Promise.reject(new Error("no more listings"));
    },
    baselineDirectories: () => {
      reads.push("baseline-directories");
      return Promise.resolve(baseline);
    },
  };
  return { privateWorkspace: "/copy", changes, reads };
}

describe("learnTestOutputs", () => {
  it("a build tree the command created is its output whole: what a rebuild adds there needs no second run", async () => {
    const copy = scriptedCopy([none(), cmakeFirstBuild], seeded);
    const first = await watchFilesWritten(copy, () => Promise.resolve(1), undefined);
    let reruns = 0;
    const learned = await learnTestOutputs({
      source: copy,
      first,
      rerun: () => Promise.resolve(++reruns),
      signal: undefined,
    });
    // compiler_depend.internal, written only by the agent's rebuild, is under `_build/`.
    expect(learned).toEqual({ outputs: ["_build/", "src/__pycache__/"], ranTwice: false });
    expect(reruns).toBe(0);
    expect(copy.reads).toEqual(["changed-files", "changed-files", "baseline-directories"]);
  });

  it("an in-source build runs twice and adds what only the rebuild writes, in old and new directories", async () => {
    const firstBuild = new Map([
      ["CMakeCache.txt", "100644 c1"],
      ["tests/Makefile", "100644 c2"],
      ["tests/CMakeFiles/test_semver.dir/test_semver.c.o", "100644 c3"],
    ]);
    const rebuild = new Map([
      ...firstBuild,
      ["tests/CMakeFiles/test_semver.dir/compiler_depend.internal", "100644 c4"],
      ["src/semver.d", "100644 c5"],
      ["deps/semver.dep", "100644 c6"],
    ]);
    const copy = scriptedCopy([none(), firstBuild, rebuild], seeded);
    const first = await watchFilesWritten(copy, () => Promise.resolve(1), undefined);
    const phases: string[] = [];
    const learned = await learnTestOutputs({
      source: copy,
      first,
      rerun: () => Promise.resolve(2),
      onRerun: () => phases.push("again"),
      signal: undefined,
    });
    expect(learned).toEqual({
      outputs: ["CMakeCache.txt", "deps/", "src/semver.d", "tests/CMakeFiles/", "tests/Makefile"],
      ranTwice: true,
    });
    expect(phases).toEqual(["again"]);
  });

  it("a command that wrote nothing costs no reading and no second run", async () => {
    const copy = scriptedCopy([none(), none()], seeded);
    const first = await watchFilesWritten(copy, () => Promise.resolve(0), undefined);
    const learned = await learnTestOutputs({
      source: copy,
      first,
      rerun: () => Promise.reject(new Error("must not run")),
      signal: undefined,
    });
    expect(learned).toEqual({ outputs: [], ranTwice: false });
    expect(copy.reads).toEqual(["changed-files", "changed-files"]);
  });
});
