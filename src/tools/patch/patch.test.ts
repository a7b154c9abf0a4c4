import { describe, expect, it } from "vitest";
import { applyHunks, createUnifiedDiff, parsePatch, PatchParseError } from "./index.js";

function applyOne(original: string, patch: string): string {
  const [file] = parsePatch(patch);
  if (!file) throw new Error("no file");
  const result = applyHunks(original, file.hunks);
  if (!result.ok) throw new Error(JSON.stringify(result.failures));
  return result.text;
}

describe("parsePatch", () => {
  it("reads a git multi-file diff with add, delete, modify and rename", () => {
    const files = parsePatch(
      [
        "diff --git a/src/a.ts b/src/a.ts",
        "index 1111111..2222222 100644",
        "--- a/src/a.ts",
        "+++ b/src/a.ts",
        "@@ -1,3 +1,3 @@",
        " one",
        "-two",
        "+TWO",
        " three",
        "diff --git a/new.txt b/new.txt",
        "new file mode 100644",
        "index 0000000..3333333",
        "--- /dev/null",
        "+++ b/new.txt",
        "@@ -0,0 +1,2 @@",
        "+hello",
        "+world",
        "diff --git a/old.txt b/old.txt",
        "deleted file mode 100644",
        "--- a/old.txt",
        "+++ /dev/null",
        "@@ -1 +0,0 @@",
        "-bye",
        "diff --git a/from.txt b/to.txt",
        "similarity index 100%",
        "rename from from.txt",
        "rename to to.txt",
      ].join("\n"),
    );
    expect(files.map((f) => [f.kind, f.oldPath, f.newPath])).toEqual([
      ["modify", "src/a.ts", "src/a.ts"],
      ["add", undefined, "new.txt"],
      ["delete", "old.txt", undefined],
      ["rename", "from.txt", "to.txt"],
    ]);
    expect(files[0]?.hunks[0]).toMatchObject({
      oldStart: 1,
      oldLines: 3,
      newStart: 1,
      newLines: 3,
    });
    expect(files[3]?.hunks).toEqual([]);
  });

  it("reads plain diffs without a/ b/ prefixes and drops timestamps", () => {
    const [file] = parsePatch(
      "--- lib/x.c\t2024-01-01 10:00:00\n+++ lib/x.c\t2024-01-02 10:00:00\n@@ -1 +1 @@\n-a\n+b\n",
    );
    expect(file).toMatchObject({ kind: "modify", oldPath: "lib/x.c", newPath: "lib/x.c" });
  });

  it("keeps a real directory named a/ when the other side has no b/ prefix", () => {
    const [file] = parsePatch("--- a/x\n+++ a/x\n@@ -1 +1 @@\n-1\n+2\n");
    expect(file?.oldPath).toBe("a/x");
  });

  it("reads paths with spaces, unicode and git's quoted escapes", () => {
    const files = parsePatch(
      [
        "--- a/my file.txt",
        "+++ b/my file.txt",
        "@@ -1 +1 @@",
        "-a",
        "+b",
        'diff --git "a/tab\\there" "b/tab\\there"',
        '--- "a/tab\\there"',
        '+++ "b/tab\\there"',
        "@@ -1 +1 @@",
        "-a",
        "+b",
        'diff --git "a/\\303\\274ber" "b/\\303\\274ber"',
        '--- "a/\\303\\274ber"',
        '+++ "b/\\303\\274ber"',
        "@@ -1 +1 @@",
        "-a",
        "+b",
        "--- a/日本語.md",
        "+++ b/日本語.md",
        "@@ -1 +1 @@",
        "-a",
        "+b",
      ].join("\n"),
    );
    expect(files.map((f) => f.newPath)).toEqual(["my file.txt", "tab\there", "über", "日本語.md"]);
  });

  it("reads a rename with content changes and a pure rename with spaces", () => {
    const files = parsePatch(
      [
        "diff --git a/dir one/x.txt b/dir one/y.txt",
        "similarity index 90%",
        "rename from dir one/x.txt",
        "rename to dir one/y.txt",
        "--- a/dir one/x.txt",
        "+++ b/dir one/y.txt",
        "@@ -1,2 +1,2 @@",
        " keep",
        "-old",
        "+new",
        "diff --git a/p q/r s b/p q/t u",
        "similarity index 100%",
        "rename from p q/r s",
        "rename to p q/t u",
      ].join("\n"),
    );
    expect(files[0]).toMatchObject({
      kind: "rename",
      oldPath: "dir one/x.txt",
      newPath: "dir one/y.txt",
    });
    expect(files[0]?.hunks).toHaveLength(1);
    expect(files[1]).toMatchObject({ kind: "rename", oldPath: "p q/r s", newPath: "p q/t u" });
    expect(() => parsePatch("diff --git a/p q b/p q\nold mode 100644\nnew mode 100755\n")).toThrow(
      /mode changes \(p q\) are not supported/,
    );
  });

  it("ignores text around the diffs (commit message, trailer)", () => {
    const files = parsePatch(
      "From abc Mon Sep 17 00:00:00 2001\nSubject: fix\n\nbody text\n---\n x | 2 +-\n\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n-- \n2.39.0\n",
    );
    expect(files).toHaveLength(1);
    expect(files[0]?.hunks[0]?.lines).toEqual([
      { kind: "-", text: "a" },
      { kind: "+", text: "b" },
    ]);
  });

  it("recomputes wrong hunk counts from the lines (a common model slip)", () => {
    const [file] = parsePatch("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n c\n d\n");
    expect(file?.hunks[0]).toMatchObject({ oldLines: 4, newLines: 4 });
    expect(
      applyOne("a\nb\nc\nd\n", "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n c\n d\n"),
    ).toBe("a\nB\nc\nd\n");
  });

  it("treats a blank line inside a hunk as an empty context line", () => {
    const patch = "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n\n-c\n+C\n";
    expect(applyOne("a\n\nc\n", patch)).toBe("a\n\nC\n");
  });

  it("reads a removed line that starts with '-- ' as a removal, not a file header", () => {
    const patch = "--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,1 @@\n--- comment\n+++ added\n-select 1;\n";
    const [file] = parsePatch(patch);
    expect(file?.hunks[0]?.lines).toEqual([
      { kind: "-", text: "-- comment" },
      { kind: "+", text: "++ added" },
      { kind: "-", text: "select 1;" },
    ]);
  });

  it("handles CRLF patch text", () => {
    const patch = "--- a/x\r\n+++ b/x\r\n@@ -1 +1 @@\r\n-a\r\n+b\r\n";
    expect(applyOne("a\n", patch)).toBe("b\n");
  });

  it.each([
    ["empty text", "", /no file changes/],
    ["prose only", "please change foo to bar", /no file changes/],
    ["a hunk without a file header", "@@ -1 +1 @@\n-a\n+b\n", /before any file header/],
    ["a bad hunk header", "--- a/x\n+++ b/x\n@@ nonsense @@\n-a\n", /bad hunk header/],
    ["a context-only hunk", "--- a/x\n+++ b/x\n@@ -1 +1 @@\n a\n", /changes nothing/],
    ["the Begin Patch format", "*** Begin Patch\n*** Update File: x\n", /Begin Patch/],
    [
      "a binary patch",
      "diff --git a/x.png b/x.png\nindex 1..2\nGIT binary patch\nliteral 5\n",
      /binary patches are not supported/,
    ],
    ["a modify without hunks", "--- a/x\n+++ b/x\n", /no hunks/],
  ])("refuses %s with a line number and a reason", (_name, patch, message) => {
    expect(() => parsePatch(patch)).toThrow(PatchParseError);
    expect(() => parsePatch(patch)).toThrow(message);
  });
});

describe("applyHunks", () => {
  const base = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join("\n") + "\n";

  it("applies a hunk whose header line numbers are off", () => {
    const patch = "--- a/x\n+++ b/x\n@@ -2,3 +2,3 @@\n line 19\n-line 20\n+LINE 20\n line 21\n";
    const [file] = parsePatch(patch);
    const result = applyHunks(base, file?.hunks ?? []);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.text).toContain("line 19\nLINE 20\nline 21");
    expect(result.notes[0]).toMatch(/applied at line 19 \(17 line\(s\) later/);
  });

  it("applies several hunks in order and keeps later hunks after earlier ones", () => {
    const patch = [
      "--- a/x",
      "+++ b/x",
      "@@ -1,2 +1,3 @@",
      " line 1",
      "+inserted",
      " line 2",
      "@@ -10,2 +11,1 @@",
      "-line 10",
      " line 11",
    ].join("\n");
    const out = applyOne(base, patch);
    expect(out.split("\n").slice(0, 3)).toEqual(["line 1", "inserted", "line 2"]);
    expect(out).not.toContain("line 10\n");
    expect(out).toContain("line 9\nline 11\n");
  });

  it("reports every hunk that does not apply, with the closest place and the differing line", () => {
    const patch = [
      "--- a/x",
      "+++ b/x",
      "@@ -5,3 +5,3 @@",
      " line 5",
      "-line six",
      "+LINE 6",
      " line 7",
      "@@ -20 +20 @@",
      "-nothing like this",
      "+x",
    ].join("\n");
    const [file] = parsePatch(patch);
    const result = applyHunks(base, file?.hunks ?? []);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.failures).toHaveLength(2);
    expect(result.failures[0]?.reason).toMatch(
      /closest match at line 5 \(2 of 3 lines agree\), but hunk line 2 expects "line six" where the file has "line 6" \(line 6\)/,
    );
    expect(result.failures[1]?.reason).toMatch(/not found anywhere/);
  });

  it("applies with whitespace fuzz but keeps the file's own context lines", () => {
    const original = "function f() {\n\tif (x) {\n\t\treturn 1;\n\t}\n}\n";
    const patch =
      "--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n  if (x) {\n-    return 1;\n+\t\treturn 2;\n  }\n";
    const [file] = parsePatch(patch);
    const result = applyHunks(original, file?.hunks ?? []);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.text).toBe("function f() {\n\tif (x) {\n\t\treturn 2;\n\t}\n}\n");
    expect(result.notes[0]).toMatch(/ignoring indentation/);
  });

  it("keeps CRLF line endings and a BOM", () => {
    const original = "\uFEFFa\r\nb\r\nc\r\n";
    expect(applyOne(original, "--- a/x\n+++ b/x\n@@ -1,3 +1,4 @@\n a\n-b\n+B\n+B2\n c\n")).toBe(
      "\uFEFFa\r\nB\r\nB2\r\nc\r\n",
    );
  });

  it("keeps a missing final newline, and follows the patch's no-newline markers", () => {
    expect(
      applyOne(
        "a\nb",
        "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n\\ No newline at end of file\n",
      ),
    ).toBe("A\nb");
    // The patch adds a final newline.
    expect(
      applyOne(
        "a\nb",
        "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n",
      ),
    ).toBe("a\nb\n");
    // The patch removes the final newline.
    expect(
      applyOne(
        "a\nb\n",
        "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n",
      ),
    ).toBe("a\nb");
  });

  it("creates content for an empty file and removes all of it", () => {
    expect(applyOne("", "--- /dev/null\n+++ b/x\n@@ -0,0 +1,2 @@\n+a\n+b\n")).toBe("a\nb\n");
    expect(
      applyOne("", "--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+a\n\\ No newline at end of file\n"),
    ).toBe("a");
    expect(applyOne("a\nb\n", "--- a/x\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n")).toBe("");
  });

  it("inserts at a zero-length old range after the named line", () => {
    expect(applyOne("a\nb\nc\n", "--- a/x\n+++ b/x\n@@ -2,0 +3 @@\n+new\n")).toBe("a\nb\nnew\nc\n");
  });

  it("applies a hunk to a huge file quickly enough to be usable", () => {
    const huge = Array.from({ length: 200_000 }, (_, i) => `row ${i}`).join("\n") + "\n";
    const out = applyOne(
      huge,
      "--- a/x\n+++ b/x\n@@ -150000,1 +150000,1 @@\n-row 149999\n+changed\n",
    );
    expect(out.split("\n")[149_999]).toBe("changed");
    expect(out.length).toBe(huge.length - "row 149999".length + "changed".length);
  });
});

describe("createUnifiedDiff", () => {
  it("produces a minimal diff with context and line numbers", () => {
    const diff = createUnifiedDiff({
      oldText: "a\nb\nc\nd\ne\nf\ng\nh\n",
      newText: "a\nb\nc\nD\ne\nf\ng\nh\n",
      oldPath: "x",
      newPath: "x",
    });
    expect(diff).toBe("--- a/x\n+++ b/x\n@@ -1,7 +1,7 @@\n a\n b\n c\n-d\n+D\n e\n f\n g\n");
  });

  it("returns an empty string when nothing changed", () => {
    expect(createUnifiedDiff({ oldText: "a\n", newText: "a\n" })).toBe("");
  });

  it("marks missing final newlines", () => {
    const diff = createUnifiedDiff({ oldText: "a\n", newText: "a", oldPath: "x", newPath: "x" });
    expect(diff).toBe("--- a/x\n+++ b/x\n@@ -1,1 +1,1 @@\n-a\n+a\n\\ No newline at end of file\n");
  });

  // Round trip: for many edits, the diff applied to the old text must give the new text.
  const seeds = Array.from({ length: 200 }, (_, i) => i + 1);
  it.each(seeds)("round-trips random edit #%i through parsePatch + applyHunks", (seed) => {
    const random = mulberry32(seed);
    const oldLines = Array.from({ length: 1 + Math.floor(random() * 40) }, () =>
      pick(random, ["x", "y", "z", "", "  indented", "dup", "dup"]),
    );
    const newLines = oldLines.flatMap((line) => {
      const r = random();
      if (r < 0.1) return [];
      if (r < 0.2) return [line, `added ${Math.floor(random() * 5)}`];
      if (r < 0.3) return [`changed ${line}`];
      return [line];
    });
    if (random() < 0.2) newLines.unshift("head");
    const oldFinal = random() < 0.8;
    const newFinal = random() < 0.8;
    const oldText = oldLines.join("\n") + (oldFinal ? "\n" : "");
    const newText = newLines.length === 0 ? "" : newLines.join("\n") + (newFinal ? "\n" : "");
    const diff = createUnifiedDiff({
      oldText,
      newText,
      oldPath: "f",
      newPath: "f",
      context: seed % 4,
    });
    if (diff === "") {
      expect(newText).toBe(oldText);
      return;
    }
    expect(applyOne(oldText, diff)).toBe(newText);
  });
});

describe("createUnifiedDiff on large inputs", () => {
  it.each([1, 2, 3, 4, 5])(
    "round-trips scattered edits of a 3000-line file (anchored diff) #%i",
    (seed) => {
      const random = mulberry32(seed * 7919);
      const oldLines = Array.from({ length: 3000 }, (_, i) =>
        random() < 0.2 ? "dup" : `line ${i}`,
      );
      const newLines = oldLines.flatMap((line) => {
        const r = random();
        if (r < 0.03) return [];
        if (r < 0.06) return [line, "inserted"];
        if (r < 0.09) return [`${line} changed`];
        return [line];
      });
      const oldText = `${oldLines.join("\n")}\n`;
      const newText = `${newLines.join("\n")}\n`;
      const diff = createUnifiedDiff({ oldText, newText, oldPath: "f", newPath: "f" });
      expect(applyOne(oldText, diff)).toBe(newText);
      // Anchoring keeps the diff near the size of the change, far below a whole-file rewrite.
      expect(diff.length).toBeLessThan(oldText.length);
    },
  );
});

function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a |= 0;
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)] as T;
}
