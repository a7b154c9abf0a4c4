import { describe, expect, it } from "vitest";

import { linkProblems, linksAfterPatch, type RepositoryLinks } from "./link-problems.js";
import type { PatchedFile } from "./parse-git-patch.js";
import { patchProblems } from "./patch-problems.js";

const link = (
  at: string,
  target: string,
  change: PatchedFile["change"] = "added",
): PatchedFile => ({
  path: at,
  change,
  binary: false,
  mode: "120000",
  symlinkTarget: target,
});
const file = (at: string, change: PatchedFile["change"] = "added"): PatchedFile => ({
  path: at,
  change,
  binary: false,
  mode: "100644",
});
const deleted = (at: string): PatchedFile => ({ path: at, change: "deleted", binary: false });
const movedAsIs = (from: string, to: string): PatchedFile => ({
  path: to,
  from,
  change: "renamed",
  binary: false,
});

/** A repository whose links are these; it records which paths were asked for all links. */
function repository(links: Record<string, string>): RepositoryLinks & { listed: number } {
  const map = new Map(Object.entries(links));
  const repo = {
    listed: 0,
    target: (at: string) => map.get(at),
    all: () => {
      repo.listed += 1;
      return [...map.keys()];
    },
  };
  return repo;
}

/** `path problem` lines, as `cordon apply` prints them. */
function refusals(files: PatchedFile[], repo = repository({})): string[] {
  return linkProblems(files, repo).map((p) => `${p.path} ${p.problem}`);
}

describe("linkProblems judges links in the tree as it will be after the patch", () => {
  it("the attack of issue 23: two links the patch adds, each inside as text", () => {
    expect(refusals([link("a/x", ".."), link("l", "a/x/../victim")])).toEqual([
      "l is a symlink that leads out of the workspace: l -> a/x/../victim: a/x -> .. leaves the workspace (by the `..` of l -> a/x/../victim)",
    ]);
    // The patch's order does not matter: the tree after the patch is judged as a whole.
    expect(refusals([link("l", "a/x/../victim"), link("a/x", "..")])).toHaveLength(1);
    // patchProblems, what diff and apply share, refuses it too, without any disk.
    expect(patchProblems([link("a/x", ".."), link("l", "a/x/../victim")])).toHaveLength(1);
  });

  it("deeper chains reach any host path: depth 3 and 4 through the patch's own links", () => {
    const deep = [
      link("d/e/f/g", ".."),
      link("d/e/h", "f/g/.."),
      link("d/i", "e/h/.."),
      link("ssh", "d/i/../../../home/u/.ssh"),
    ];
    expect(refusals(deep)).toEqual([
      expect.stringMatching(
        /^ssh is a symlink that leads out of the workspace: ssh -> d\/i\/\.\.\/\.\.\/\.\.\/home\/u\/\.ssh: d\/i -> e\/h\/\.\.: d\/e\/h -> f\/g\/\.\.: d\/e\/f\/g -> \.\. leaves/,
      ),
    ]);
  });

  it("mixes the patch's links with the repository's own, read from the workspace", () => {
    // The repository has `a/x -> ..` (inside: the root); the patch adds only the second step.
    const repo = repository({ "a/x": ".." });
    expect(refusals([link("l", "a/x/../victim")], repo)).toEqual([
      expect.stringContaining("l -> a/x/../victim: a/x -> .. leaves the workspace"),
    ]);
    // Judged against the patch alone, the same link looks inside: why apply reads the disk.
    expect(refusals([link("l", "a/x/../victim")])).toEqual([]);
    // A repository link the patch goes through that stays inside is fine.
    expect(refusals([link("l", "a/x/victim")], repo)).toEqual([]);
  });

  it("absolute targets, directly or through the repository's link", () => {
    expect(refusals([link("l", "/etc/passwd")])).toEqual([
      "l is a symlink that leads out of the workspace: l -> /etc/passwd leaves the workspace",
    ]);
    expect(refusals([link("l", "etc/passwd")], repository({ etc: "/etc" }))).toEqual([
      "l is a symlink that leads out of the workspace: l -> etc/passwd: etc -> /etc leaves the workspace",
    ]);
  });

  it("loops and chains into .git", () => {
    expect(refusals([link("l", "m"), link("m", "l")])).toEqual([
      expect.stringMatching(/^l is a symlink that loops: l -> m: m -> l: .* loops \(more than 40/),
      expect.stringMatching(/^m is a symlink that loops: m -> l: l -> m/),
    ]);
    expect(refusals([link("l", "g/hooks/pre-commit")], repository({ g: "sub/.git" }))).toEqual([
      "l is a symlink that leads into .git: l -> g/hooks/pre-commit: g -> sub/.git enters .git",
    ]);
  });

  it("a link to a link the same patch re-points or deletes is judged by the link's new state", () => {
    const repo = repository({ m: "sub", "sub/keep": "x" });
    // `l -> m/../x` is inside while `m -> sub`; the patch re-points `m` to `.`, so `..` climbs out.
    expect(refusals([link("l", "m/../x"), link("m", ".", "modified")], repo)).toEqual([
      expect.stringContaining("l -> m/../x: m -> . leaves the workspace"),
    ]);
    // The repository's `up -> ..` leads out already; a patch that deletes it may point through the
    // name `up` again, now a plain directory.
    const upRepo = repository({ up: ".." });
    expect(refusals([link("l", "up/x")], upRepo)).toEqual([
      expect.stringContaining("l -> up/x: up -> .. leaves the workspace"),
    ]);
    expect(refusals([link("l", "up/x"), deleted("up")], upRepo)).toEqual([]);
    // Deleted and written again as a link (git's type change): the new target counts.
    expect(refusals([link("l", "up/x"), deleted("up"), link("up", "sub")], upRepo)).toEqual([]);
    expect(refusals([deleted("up"), link("up", "../..")], repository({}))).toEqual([
      "up is a symlink that leads out of the workspace: up -> ../.. leaves the workspace",
    ]);
  });

  it("a repository link that stays inside before the patch but leads out after it is refused", () => {
    // The repository's own `l -> a/x/../victim` with `a/x` a directory; the patch makes `a/x`
    // a link to `..` (deleting the file that was in it).
    const repo = repository({ l: "a/x/../victim" });
    expect(refusals([deleted("a/x/file"), link("a/x", "..")], repo)).toEqual([
      "l is a symlink the repository has that now leads out of the workspace: l -> a/x/../victim: a/x -> .. leaves the workspace (by the `..` of l -> a/x/../victim)",
    ]);
    // One that led out before the patch is the repository's own, not the patch's doing.
    expect(refusals([link("a/x", "..")], repository({ old: "/etc" }))).toEqual([]);
    // A patch that touches no link does not list the repository's links at all.
    const listed = repository({ l: "x" });
    refusals([file("src/app.py", "modified")], listed);
    expect(listed.listed).toBe(0);
  });

  it("a file written, removed or moved through a link that leads out is refused", () => {
    const repo = repository({ out: "/home/u", "a/up": "../.." });
    expect(refusals([file("out/.bashrc")], repo)).toEqual([
      "out/.bashrc is written through a symlink that leads out of the workspace: out -> /home/u leaves the workspace",
    ]);
    expect(refusals([file("a/up/victim", "modified")], repo)).toEqual([
      expect.stringContaining("a/up -> ../.. leaves the workspace"),
    ]);
    expect(refusals([deleted("out/.ssh/authorized_keys")], repo)).toEqual([
      expect.stringMatching(/^out\/\.ssh\/authorized_keys is removed through a symlink/),
    ]);
    expect(refusals([movedAsIs("out/id_rsa", "stolen")], repo)).toEqual([
      expect.stringMatching(/^out\/id_rsa is removed through a symlink/),
    ]);
    // Through a link the patch itself adds.
    expect(refusals([link("h", "../.."), file("h/x")])).toEqual([
      "h is a symlink that leads out of the workspace: h -> ../.. leaves the workspace",
      "h/x is written through a symlink that leads out of the workspace: h -> ../.. leaves the workspace",
    ]);
    // Through a link that stays inside: not this check's business (git apply refuses writing
    // beyond a symlink on its own).
    expect(refusals([file("in/x")], repository({ in: "src" }))).toEqual([]);
  });

  it("links whose name or target is not UTF-8 are refused: different bytes would read alike", () => {
    // `\xff -> ..` and `\xfe -> sub` both read as U+FFFD; the kernel tells them apart.
    expect(
      refusals([link("\uFFFD", ".."), link("\uFFFD", "sub"), link("l", "\uFFFD/../victim")]),
    ).toEqual([
      "\uFFFD is a symlink whose name is not UTF-8",
      "\uFFFD is a symlink whose name is not UTF-8",
      "l is a symlink that cannot be judged: a target that is not UTF-8: l -> \uFFFD/../victim is not UTF-8",
    ]);
  });

  it("a link moved as is keeps its target, read from the repository", () => {
    const repo = repository({ "sub/link": "../code.py" });
    expect(refusals([movedAsIs("sub/link", "link")], repo)).toEqual([
      "link is a symlink that leads out of the workspace: link -> ../code.py leaves the workspace",
    ]);
    expect(refusals([movedAsIs("sub/link", "sub2/link")], repo)).toEqual([]);
  });

  it("the tree after the patch: written wins, removed is gone, the rest is as on disk", () => {
    const repo = repository({ kept: "k", gone: "g", moved: "m", retyped: "r" });
    const after = linksAfterPatch(
      [
        deleted("gone"),
        movedAsIs("moved", "there"),
        deleted("retyped"),
        file("retyped"),
        link("new", "n"),
      ],
      repo,
    );
    expect(
      ["kept", "gone", "moved", "there", "retyped", "new", "other"].map((at) => after.target(at)),
    ).toEqual(["k", undefined, undefined, "m", undefined, "n", undefined]);
  });
});
