/**
 * cordon-recorder (src/sandbox/docker/inspector/recorder.c), run the way a spare recording
 * inspector runs it — checkpoint-copy.sh `ahead` with the recorder, as the sandbox user, in a
 * container of the sandbox image with /workspace, /baseline, /checkpoints and /scratch — against
 * git itself: `git add -A` from the baseline's entries and `write-tree`, with git's defaults, in
 * another index and object directory. Each check prints what git gives, what the script gave,
 * and whether the recorder recorded it or left it to git (its reason, on stderr).
 *
 * Runs under CORDON_TEST_RUNTIME too (the gVisor pass). It must give git's tree for every copy it records, from nothing and from its cache; leave to
 * git what it cannot do exactly as git does; and not be fooled by a file rewritten in the second
 * its cache was made with its size and mtime put back.
 */
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";

import { beforeAll, describe, expect, it } from "vitest";

import { packageRoot } from "../../src/common/index.js";
import { builtExecutorBinary } from "../../src/sandbox/docker/resident/testing/built-executor.js";
import { requireSandboxImage, testLabel } from "../support/docker.js";
import { testRuntime } from "../support/sandbox-spec.js";

const run = promisify(execFile);

/** The driver's functions; a case's commands follow, calling `check INDEX [SINCE]`. */
const driver = String.raw`
set -euo pipefail
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME=/scratch LC_ALL=C
git init -q --bare /baseline
cd /workspace
# The baseline: the copy as it is now, as cordon's seed records it.
baseline() {
  GIT_DIR=/baseline GIT_WORK_TREE=/workspace GIT_INDEX_FILE=/tmp/seed-index git add -A
  GIT_DIR=/baseline git update-ref refs/cordon/baseline \
    "$(GIT_DIR=/baseline GIT_INDEX_FILE=/tmp/seed-index git write-tree)"
}
# What git gives: add -A from the baseline's entries, then write-tree (empty: git failed).
expected() {
  mkdir -p /tmp/oracle-objects
  (
    export GIT_DIR=/baseline GIT_WORK_TREE=/workspace GIT_INDEX_FILE=/tmp/oracle-index
    export GIT_OBJECT_DIRECTORY=/tmp/oracle-objects GIT_ALTERNATE_OBJECT_DIRECTORIES=/baseline/objects
    rm -f /tmp/oracle-index
    git read-tree refs/cordon/baseline && git add -A 2>/dev/null && git write-tree
  ) || true
}
# A forged cache sealed again, as recorder.c seals its own (FNV-1a, 64 bits, over its entries).
reseal() {
  python3 - "$1" <<'PY'
import sys
path = sys.argv[1]
magic, _, body = open(path, "rb").read().split(b"\0", 2)
h = 0xCBF29CE484222325
for byte in body:
    h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
open(path, "wb").write(magic + b"\0" + b"%016x" % h + b"\0" + body)
PY
}
# What the spare's recorder gives (the tree id, the last NUL-ended field, after the line that
# says it is ready, which must come first and once), and who recorded it.
check() {
  local index="$1" since=none output status=0 said
  [ "$#" -lt 2 ] || since="$2"
  rm -f /scratch/request /scratch/ready
  printf 'record\0%s\0%s\0.' "$since" "$index" |
    bash /checkpoint-copy.sh ahead /recorder >/tmp/output 2>/tmp/stderr || status=$?
  if [ "$(head -c 6 /tmp/output | od -An -c | tr -d ' ')" != 'ready\n' ] ||
    [ "$(tail -c +7 /tmp/output | head -c 6)" = "$(printf 'ready\n')" ]; then
    status=99
  fi
  output="$(tail -c +7 /tmp/output | tr '\0' '\n' | tail -n 1)"
  said="$(grep -o 'cordon-recorder: .*; recording with git' /tmp/stderr | head -n 1 || true)"
  [ -n "$said" ] || said=recorded
  printf 'check\t%s\t%s\t%s\t%s\n' "$(expected)" "$output" "$status" "$said"
}
`;

interface Check {
  expected: string;
  got: string;
  status: number;
  /** `recorded`, or the recorder's words when it left the record to git. */
  by: string;
}

let image: string;
let recorder: string;

/** Runs a case's commands after the driver's, as uid 1000 in a throwaway container. */
async function runCase(commands: string): Promise<Check[]> {
  return (await runCaseLines(commands)).checks;
}

async function runCaseLines(commands: string): Promise<{ checks: Check[]; lines: string[] }> {
  const script = path.join(packageRoot(), "src/sandbox/docker/inspector/checkpoint-copy.sh");
  const owned = "uid=1000,gid=1000,mode=0700,exec";
  const args = [
    "run",
    "--rm",
    "--network=none",
    "--user=1000:1000",
    // Under gVisor too (scripts/test-gvisor.sh), as an inspector of a gVisor sandbox runs.
    ...(testRuntime ? [`--runtime=${testRuntime}`] : []),
    ...Object.entries(testLabel).map(([key, value]) => `--label=${key}=${value}`),
    ...["/workspace", "/baseline", "/checkpoints", "/scratch"].map(
      (mount) => `--tmpfs=${mount}:${owned}`,
    ),
    `--volume=${recorder}:/recorder:ro`,
    `--volume=${script}:/checkpoint-copy.sh:ro`,
    "--entrypoint=bash",
    image,
    "-c",
    `${driver}\n${commands}`,
  ];
  const { stdout } = await run("docker", args, { maxBuffer: 16 * 1024 * 1024 });
  const lines = stdout.split("\n");
  const checks = lines
    .filter((line) => line.startsWith("check\t"))
    .map((line) => {
      const [, expected = "", got = "", status = "", by = ""] = line.split("\t");
      return { expected, got, status: Number(status), by };
    });
  return { checks, lines };
}

/** Every check gave git's tree, recorded by the recorder. */
function expectRecordedAsGit(checks: Check[], count: number): void {
  expect(checks).toHaveLength(count);
  for (const [at, check] of checks.entries()) {
    expect(check.expected, `check ${at}: git gave a tree`).toMatch(/^[0-9a-f]{40}$/);
    // Status 0: the record's output came after one `ready` line (check, above).
    expect({ at, got: check.got, by: check.by, status: check.status }).toEqual({
      at,
      got: check.expected,
      by: "recorded",
      status: 0,
    });
  }
}

describe("the checkpoint recorder", () => {
  beforeAll(async () => {
    image = await requireSandboxImage();
    const executor = await builtExecutorBinary();
    recorder = path.join(path.dirname(executor), "cordon-recorder");
  }, 180_000);

  it("gives git's tree from nothing and from its cache, through every kind of change and ignore rule", async () => {
    const checks = await runCase(String.raw`
      mkdir -p src/pkg/deep docs build vendor/kept logs empty only-ignored links
      for i in 1 2 3 4 5 6 7 8; do echo "line $i" > "src/pkg/mod$i.py"; done
      echo 'print(1)' > src/pkg/deep/main.py && chmod +x src/pkg/deep/main.py
      printf '%s\n' 'build/' '*.log' '!keep.log' 'vendor/' '/only-ignored/*.tmp' > .gitignore
      printf '%s\n' '*.generated' '!wanted.generated' > src/.gitignore
      echo 'secret' > /tmp/outside
      echo kept > vendor/kept/tracked.txt
      echo log > logs/app.log && echo keep > logs/keep.log && echo x > only-ignored/a.tmp
      ln -s ../src/pkg/mod1.py links/to-file && ln -s ../src links/to-dir && ln -s /tmp/outside links/out && ln -s nowhere links/dangling
      printf 'a\nb' > "$(printf 'name\nwith newline')" && echo q > '"quoted' && echo u > 'ünï cödé.txt' && echo s > 'with space'
      head -c 9437184 /dev/urandom > big.bin
      echo old > docs/ancient.md && touch -d @-1000 docs/ancient.md
      mkfifo pipe
      baseline
      # A tracked file under an ignored directory, as a user's force-added one.
      echo forced > vendor/forced.txt
      GIT_DIR=/baseline GIT_WORK_TREE=/workspace GIT_INDEX_FILE=/tmp/seed-index git add -f vendor/forced.txt
      GIT_DIR=/baseline git update-ref refs/cordon/baseline "$(GIT_DIR=/baseline GIT_INDEX_FILE=/tmp/seed-index git write-tree)"
      echo untracked > NOTES.md && echo g > src/x.generated && echo w > src/wanted.generated
      check keep
      sleep 1.2
      check keep
      # Every kind of change, then from the cache.
      echo changed > src/pkg/mod3.py
      rm src/pkg/mod4.py
      chmod +x src/pkg/mod5.py
      chmod -x src/pkg/deep/main.py
      rm src/pkg/mod6.py && mkdir src/pkg/mod6.py && echo now-a-dir > src/pkg/mod6.py/inside.py
      rm -r src/pkg/deep && echo now-a-file > src/pkg/deep
      ln -sf ../docs links/to-dir-2 && rm links/to-file && ln -s ../NOTES.md links/to-file
      mkdir -p newdir/sub && echo n > newdir/sub/n.py && echo l > newdir/sub/n.log && mkdir newdir/empty
      echo more > vendor/forced.txt && echo new > vendor/new.txt
      echo '*.md' >> .gitignore
      echo again > "$(printf 'name\nwith newline')"
      echo older > docs/ancient.md && touch -d @-1000 docs/ancient.md
      mkfifo src/pkg/fifo
      check keep
      check reuse
      sleep 1.2
      check keep
      check keep
      echo '!NOTES.md' >> .gitignore && rm src/.gitignore && echo x > empty/now-not
      check reuse
    `);
    expectRecordedAsGit(checks, 7);
    // The changes were seen: three states, each recorded more than once.
    expect(new Set(checks.map((check) => check.got)).size).toBe(3);
  }, 180_000);

  it("caches no file changed within a second of its record, and sees a rewrite that puts size and mtime back", async () => {
    // A change to a file gives it the kernel's clock as its ctime, which no process sets back; a
    // file cached with a ctime a second older than its record shows any later change. One changed
    // in that second is hashed again by the next record, as is each rewrite below.
    const { checks, lines } = await runCaseLines(String.raw`
      mkdir src && for i in $(seq 1 50); do echo "file $i" > "src/f$i.txt"; done
      echo 'aaaa' > README.md
      baseline
      cached() { grep -caP '(^|\x00)f\x00README\.md\x00' /checkpoints/record-cache || true; }
      sleep 1.2
      echo 'bbbb' > README.md && touch -d @1500000000 README.md
      check keep
      printf 'cached-young\t%s\n' "$(cached)"
      sleep 2.1
      check keep
      printf 'cached-old\t%s\n' "$(cached)"
      tr a-y b-z < README.md > /tmp/other && cat /tmp/other > README.md && touch -d @1500000000 README.md
      check keep
      tr a-y b-z < README.md > /tmp/other && cat /tmp/other > README.md && touch -d @1500000000 README.md
      check reuse
    `);
    const said = (name: string) =>
      lines.find((line) => line.startsWith(`${name}\t`))?.split("\t")[1];
    expect(said("cached-young"), "a file changed in the record's second is not cached").toBe("0");
    expect(said("cached-old"), "a second later it is").toBe("1");
    expectRecordedAsGit(checks, 4);
    const trees = checks.map((check) => check.got);
    expect(trees[1]).toBe(trees[0]);
    expect(new Set(trees).size, "each rewrite is seen").toBe(3);
  }, 180_000);

  it("drops a cache it cannot read, and one from the future; trusts one it can (the store is cordon's)", async () => {
    const checks = await runCase(String.raw`
      mkdir src && for i in $(seq 1 20); do echo "file $i" > "src/f$i.txt"; done
      baseline
      sleep 1.2
      check keep
      echo changed > src/f1.txt
      # Garbage, a cut-off cache, a cache with a blob id of another length: each is dropped
      # whole, and the record is git's all the same.
      cp /checkpoints/record-cache /tmp/good
      head -c 4096 /dev/urandom > /checkpoints/record-cache
      check reuse
      head -c 200 /tmp/good > /checkpoints/record-cache
      check reuse
      sed 's/\x00\([0-9a-f]\{40\}\)\x00/\x00\1ab\x00/' /tmp/good > /checkpoints/record-cache
      reseal /checkpoints/record-cache
      check reuse
      # A cache that says src/f2.txt holds src/f3.txt's blob: used, it gives another tree than
      # git's (so this can tell use from non-use); from the future, it is not used.
      sleep 1.2
      check keep
      cp /checkpoints/record-cache /tmp/good
      two="$(git hash-object src/f2.txt)" three="$(git hash-object src/f3.txt)"
      # Changed as a write cut short could leave it, entries whole but not the seal's: dropped.
      sed "s/$two/$three/" /tmp/good > /checkpoints/record-cache
      touch -d '-1 hour' /checkpoints/record-cache
      check reuse
      sed "s/$two/$three/" /tmp/good > /checkpoints/record-cache
      reseal /checkpoints/record-cache
      touch -d '-1 hour' /checkpoints/record-cache
      check reuse
      sed "s/$two/$three/" /tmp/good > /checkpoints/record-cache
      reseal /checkpoints/record-cache
      touch -d '+1 hour' /checkpoints/record-cache
      check reuse
    `);
    expect(checks).toHaveLength(8);
    const lied = checks[6] as Check;
    expect(lied.by).toBe("recorded");
    expect(lied.got, "a sealed cache in the past is used").not.toBe(lied.expected);
    expectRecordedAsGit([...checks.slice(0, 6), ...checks.slice(7)], 7);
  }, 180_000);

  it("leaves to git what it cannot record as git does, and git then records it (or fails) as without it", async () => {
    const cases: { name: string; commands: string; says: RegExp; gitFails?: boolean }[] = [
      {
        name: "a nested repository",
        commands: "mkdir -p vendor/lib/.git && echo x > vendor/lib/x.txt",
        says: /a name git treats specially/,
      },
      {
        name: "a .GIT directory",
        commands: "mkdir -p sub/.GIT && echo x > sub/.GIT/config",
        says: /a name git treats specially/,
        gitFails: true,
      },
      {
        name: "an NTFS short name of .git",
        commands: "echo x > GIT~1",
        says: /a name git treats specially/,
        gitFails: true,
      },
      {
        name: "a link named .gitmodules",
        commands: "ln -s README.md .gitmodules",
        says: /a name git treats specially/,
        gitFails: true,
      },
      {
        name: "a tracked file that is a FIFO now",
        commands: "rm README.md && mkfifo README.md",
        says: /a tracked path is no longer a file/,
        gitFails: true,
      },
      {
        name: "a file its user cannot read",
        commands: "echo x > locked.txt && chmod 000 locked.txt",
        says: /cannot read a file: Permission denied/,
        gitFails: true,
      },
      {
        name: "a directory its user cannot read",
        commands: "mkdir locked && echo x > locked/x && chmod 000 locked",
        says: /cannot open a directory/,
      },
    ];
    const results = await Promise.all(
      cases.map(async (each) => ({
        each,
        checks: await runCase(String.raw`
          echo readme > README.md && mkdir src && echo code > src/code.py
          baseline
          ${each.commands}
          check keep
        `),
      })),
    );
    for (const { each, checks } of results) {
      expect(checks, each.name).toHaveLength(1);
      const [check] = checks as [Check];
      expect(check.by, each.name).toMatch(each.says);
      if (each.gitFails) {
        expect({ name: each.name, expected: check.expected, got: check.got }).toEqual({
          name: each.name,
          expected: "",
          got: "",
        });
        expect(check.status, each.name).not.toBe(0);
      } else {
        expect(check.got, each.name).toBe(check.expected);
        expect(check.expected, each.name).toMatch(/^[0-9a-f]{40}$/);
      }
    }
  }, 240_000);

  it("leaves a baseline with a submodule, a named checkpoint's count and a fresh record to git", async () => {
    const checks = await runCase(String.raw`
      echo readme > README.md && mkdir src && echo code > src/code.py
      baseline
      check keep
      check keep -
      sleep 1.2
      check keep
      test -f /checkpoints/record-cache && printf 'check\t-\t-\t0\tkept\n'
      check fresh
      test -f /checkpoints/record-cache || printf 'check\t-\t-\t0\tremoved by fresh\n'
      GIT_DIR=/baseline GIT_INDEX_FILE=/tmp/seed-index git update-index --add --cacheinfo "160000,$(GIT_DIR=/baseline git rev-parse refs/cordon/baseline^{tree}),module"
      GIT_DIR=/baseline git update-ref refs/cordon/baseline "$(GIT_DIR=/baseline GIT_INDEX_FILE=/tmp/seed-index git write-tree)"
      check keep
    `);
    expect(checks.map((check) => check.by)).toEqual([
      "recorded",
      expect.stringMatching(/not a turn's record/),
      "recorded",
      "kept",
      expect.stringMatching(/index fresh/),
      "removed by fresh",
      expect.stringMatching(/the baseline has a submodule/),
    ]);
    for (const check of checks.filter((each) => /^[0-9a-f]{40}$/.test(each.expected))) {
      expect(check.got).toBe(check.expected);
    }
  }, 180_000);
  it("joins the store's packs, one a record, into one once there are many; every recorded tree still reads back", async () => {
    const { checks, lines } = await runCaseLines(String.raw`
      mkdir -p src/a src/b && echo one > src/a/one.py && echo two > src/b/two.py
      baseline
      for round in $(seq 1 20); do
        echo "round $round" >> src/a/one.py && echo "round $round" > "src/b/new$round.py"
        check reuse
        tail -c +7 /tmp/output | tr '\0' '\n' | tail -n 1 >> /tmp/trees
        printf 'packs\t%s\n' "$(find /checkpoints/objects/pack -name '*.pack' | wc -l)"
      done
      export GIT_DIR=/baseline GIT_OBJECT_DIRECTORY=/checkpoints/objects
      export GIT_ALTERNATE_OBJECT_DIRECTORIES=/baseline/objects
      while read -r tree; do
        if git archive "$tree" >/dev/null; then printf 'reads\t%s\n' "$tree"; else printf 'broken\t%s\n' "$tree"; fi
      done < /tmp/trees
    `);
    expectRecordedAsGit(checks, 20);
    const packs = lines
      .filter((line) => line.startsWith("packs\t"))
      .map((line) => Number(line.split("\t")[1]));
    // A pack a record, up to 17; the next record's spare joins them before it records its own.
    expect(packs.slice(0, 17)).toEqual([...Array(17).keys()].map((at) => at + 1));
    expect(packs.slice(17)).toEqual([2, 3, 4]);
    const read = lines.filter((line) => /^(reads|broken)\t/.test(line));
    expect(read).toEqual(checks.map((check) => `reads\t${check.got}`));
  }, 240_000);
  it("drops a cache naming trees the store lacks: git records that turn, the recorder the next", async () => {
    const checks = await runCase(String.raw`
      mkdir src && for i in $(seq 1 10); do echo "file $i" > "src/f$i.txt"; done
      baseline
      echo new > src/new.txt
      sleep 1.2
      check keep
      # The objects the cache names gone, as after a record killed before its pack was in place.
      rm -f /checkpoints/objects/pack/*
      echo changed > src/f1.txt
      check keep
      test -e /checkpoints/record-cache || printf 'check\t-\t-\t0\tcache dropped\n'
      echo again > src/f2.txt
      check keep
    `);
    expect(checks).toHaveLength(4);
    const [first, failed, dropped, next] = checks as [Check, Check, Check, Check];
    expectRecordedAsGit([first], 1);
    expect(failed.by).toMatch(/fast-import/);
    expect(failed.got).toBe(failed.expected);
    expect(dropped.by).toBe("cache dropped");
    expectRecordedAsGit([next], 1);
  }, 180_000);
});
