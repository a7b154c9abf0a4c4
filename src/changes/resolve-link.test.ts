import { describe, expect, it } from "vitest";

import {
  describeResolution,
  maxLinksFollowed,
  resolveLink,
  type LinkResolution,
} from "./resolve-link.js";

/** A tree given as its links; every other path is a directory or a file. */
function tree(links: Record<string, string>): (at: string) => string | undefined {
  const map = new Map(Object.entries(links));
  return (at) => map.get(at);
}

/** The resolution as one line: the path it reaches, or the refusal naming the chain. */
function resolved(at: string, links: Record<string, string>): string {
  const resolution: LinkResolution = resolveLink(at, tree(links));
  return resolution.ok ? `ok: ${resolution.path}` : describeResolution(resolution);
}

describe("resolveLink follows links as the kernel does", () => {
  it("depth 1: a target that stays inside, and one that climbs out", () => {
    expect(resolved("l", { l: "x" })).toBe("ok: x");
    expect(resolved("sub/l", { "sub/l": "../x" })).toBe("ok: x");
    expect(resolved("sub/l", { "sub/l": "../sub/../x/./y/" })).toBe("ok: x/y");
    expect(resolved("l", { l: "." })).toBe("ok: ");
    expect(resolved("sub/l", { "sub/l": "../../x" })).toBe("sub/l -> ../../x leaves the workspace");
  });

  it("depth 2: the `..` after a link is taken from where the link led, not from the text", () => {
    // As text `a/x/../victim` is `a/victim`; the kernel resolves `a/x` first: the root.
    expect(resolved("l", { "a/x": "..", l: "a/x/../victim" })).toBe(
      "l -> a/x/../victim: a/x -> .. leaves the workspace (by the `..` of l -> a/x/../victim)",
    );
    // The same text with `a/x` a plain directory is inside.
    expect(resolved("l", { l: "a/x/../victim" })).toBe("ok: a/victim");
    // The link that climbs out is the one named last.
    expect(resolved("l", { l: "a", a: "../etc" })).toBe("l -> a: a -> ../etc leaves the workspace");
  });

  it("depth 3 and 4: chains through directories that are links", () => {
    const three = { "x/y/p": "..", "x/q": "y/p/..", l: "x/q/../v" };
    expect(resolved("x/q", three)).toBe("ok: ");
    expect(resolved("l", three)).toBe(
      "l -> x/q/../v: x/q -> y/p/..: x/y/p -> .. leaves the workspace (by the `..` of l -> x/q/../v)",
    );
    const four = { "d/e/f/g": "..", "d/e/h": "f/g/..", "d/i": "e/h/..", l: "d/i/../../etc" };
    expect(resolved("d/i", four)).toBe("ok: ");
    expect(resolved("l", four)).toMatch(
      /^l -> d\/i\/\.\.\/\.\.\/etc: d\/i -> e\/h\/\.\.: d\/e\/h -> f\/g\/\.\.: d\/e\/f\/g -> \.\. leaves the workspace/,
    );
    // Four links that all stay inside.
    expect(resolved("l", { l: "a/b", a: "c", "c/b": "../d", d: "e/f" })).toBe("ok: e/f");
  });

  it("a link inside a link's directory is resolved from where the directory led", () => {
    // `a -> deep/er`, and `a/up` is really `deep/er/up`: `../..` from there is the root.
    const links = { a: "deep/er", "deep/er/up": "../../x" };
    expect(resolved("a/up", links)).toBe("ok: x");
    expect(resolved("a/up/../../..", links)).toMatch(/leaves the workspace$/);
  });

  it("absolute targets leave the workspace, at any depth", () => {
    expect(resolved("l", { l: "/etc/passwd" })).toBe("l -> /etc/passwd leaves the workspace");
    expect(resolved("l", { l: "a/passwd", a: "/etc" })).toBe(
      "l -> a/passwd: a -> /etc leaves the workspace",
    );
  });

  it("a chain into .git is refused in any spelling", () => {
    expect(resolved("l", { l: "g/config", g: ".git" })).toBe(
      "l -> g/config: g -> .git enters .git",
    );
    expect(resolved("l", { l: "sub/.GIT/hooks" })).toBe("l -> sub/.GIT/hooks enters .git");
    expect(resolved("l", { l: "a/../x/git~1" })).toBe("l -> a/../x/git~1 enters .git");
    // .github is not .git.
    expect(resolved("l", { l: ".github/workflows" })).toBe("ok: .github/workflows");
  });

  it("loops are ELOOP: refused after the kernel's limit, the chain shown by its ends", () => {
    expect(resolved("l", { l: "l" })).toMatch(
      /^l -> l: l -> l: .*: …: l -> l loops \(more than 40/,
    );
    const twoStep = resolveLink("l", tree({ l: "m", m: "l" }));
    expect(twoStep).toMatchObject({ ok: false, why: "loops" });
    expect(twoStep.ok ? 0 : twoStep.chain.length).toBe(maxLinksFollowed + 1);
    // A link into itself as a directory loops too.
    expect(resolveLink("l", tree({ l: "l/x" }))).toMatchObject({ ok: false, why: "loops" });
    // 40 links in a row are fine, as for the kernel.
    const forty = Object.fromEntries(
      Array.from({ length: maxLinksFollowed }, (_, i) => [`l${i}`, `l${i + 1}`]),
    );
    expect(resolved("l0", forty)).toBe(`ok: l${maxLinksFollowed}`);
    expect(resolved("l0", { ...forty, [`l${maxLinksFollowed}`]: "x" })).toMatch(/loops/);
  });

  it("an empty target is refused", () => {
    expect(resolved("l", { l: "" })).toBe("l ->  has an empty target");
  });

  it("a missing component is walked as a directory: that refuses more, never less", () => {
    expect(resolved("l", { l: "missing/../../x" })).toMatch(/leaves the workspace$/);
    expect(resolved("l", { l: "missing/../x" })).toBe("ok: x");
  });
});
