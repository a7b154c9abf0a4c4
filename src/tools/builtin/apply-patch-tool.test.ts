import { describe, expect, it } from "vitest";
import { FileOperationError } from "../../common/index.js";
import { createUnifiedDiff } from "../patch/index.js";
import { MemorySandbox } from "../testing/memory-sandbox.js";
import { toolHarness } from "../testing/harness.js";

const multiFile = [
  "diff --git a/src/app.ts b/src/app.ts",
  "--- a/src/app.ts",
  "+++ b/src/app.ts",
  "@@ -1,3 +1,4 @@",
  ' import { x } from "./x";',
  '+import { y } from "./y";',
  " ",
  "-run(x);",
  "+run(x, y);",
  "diff --git a/src/y.ts b/src/y.ts",
  "new file mode 100644",
  "--- /dev/null",
  "+++ b/src/y.ts",
  "@@ -0,0 +1 @@",
  "+export const y = 2;",
  "diff --git a/old.md b/old.md",
  "deleted file mode 100644",
  "--- a/old.md",
  "+++ /dev/null",
  "@@ -1 +0,0 @@",
  "-obsolete",
  "diff --git a/docs/a b.md b/docs/c d.md",
  "similarity index 90%",
  "rename from docs/a b.md",
  "rename to docs/c d.md",
  "--- a/docs/a b.md",
  "+++ b/docs/c d.md",
  "@@ -1,2 +1,2 @@",
  " # Title",
  "-old line",
  "+new line",
  "",
].join("\n");

function project(): MemorySandbox {
  return new MemorySandbox({
    files: {
      "src/app.ts": 'import { x } from "./x";\n\nrun(x);\n',
      "old.md": "obsolete\n",
      "docs/a b.md": "# Title\nold line\n",
    },
  });
}

describe("apply_patch", () => {
  it("applies a multi-file patch: modify, add, delete and rename", async () => {
    const sandbox = project();
    const { call, text } = toolHarness(sandbox);
    const result = await call("apply_patch", { patch: multiFile });
    expect(result.isError).toBe(false);
    expect(text(result)).toBe(
      [
        "Applied the patch (4 file change(s)):",
        "M src/app.ts (+2 -1)",
        "A src/y.ts (+1 -0)",
        "D old.md",
        "R docs/a b.md → docs/c d.md (+1 -1)",
      ].join("\n"),
    );
    expect(sandbox.files.getText("src/app.ts")).toBe(
      'import { x } from "./x";\nimport { y } from "./y";\n\nrun(x, y);\n',
    );
    expect(sandbox.files.getText("src/y.ts")).toBe("export const y = 2;\n");
    expect(sandbox.files.has("old.md")).toBe(false);
    expect(sandbox.files.has("docs/a b.md")).toBe(false);
    expect(sandbox.files.getText("docs/c d.md")).toBe("# Title\nnew line\n");
  });

  it("changes nothing when one hunk of one file does not apply, and reports it precisely", async () => {
    const sandbox = project();
    const before = sandbox.files.filePaths().map((path) => [path, sandbox.files.getText(path)]);
    const broken = multiFile.replace("-old line", "-a line that is not there");
    const { call, text } = toolHarness(sandbox);
    const result = await call("apply_patch", { patch: broken });
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(
      /^The patch does not apply; nothing was changed\. 1 problem\(s\):/,
    );
    expect(text(result)).toMatch(
      /- docs\/a b\.md \(patch line 22\): hunk 1 @@ -1,2 \+1,2 @@ \(patch line 28\) does not apply: closest match at line 1 \(1 of 2 lines agree\), but hunk line 2 expects "a line that is not there" where the file has "old line" \(line 2\)/,
    );
    expect(sandbox.files.filePaths().map((path) => [path, sandbox.files.getText(path)])).toEqual(
      before,
    );
    expect(sandbox.callsTo("files.writeFile")).toEqual([]);
    expect(sandbox.callsTo("files.remove")).toEqual([]);
  });

  it("refuses to add an existing file, modify a missing one, or rename onto an existing one", async () => {
    const sandbox = new MemorySandbox({ files: { "a.txt": "a\n", "b.txt": "b\n" } });
    const { call, text } = toolHarness(sandbox);
    const add = await call("apply_patch", {
      patch: "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+x\n",
    });
    expect(text(add)).toMatch(
      /\/workspace\/a\.txt already exists; patch it as a modification instead/,
    );
    const modify = await call("apply_patch", {
      patch: "--- a/none.txt\n+++ b/none.txt\n@@ -1 +1 @@\n-a\n+b\n",
    });
    expect(text(modify)).toMatch(/none\.txt does not exist; to create it use --- \/dev\/null/);
    const rename = await call("apply_patch", {
      patch: "diff --git a/a.txt b/b.txt\nrename from a.txt\nrename to b.txt\n",
    });
    expect(text(rename)).toMatch(/b\.txt already exists; pick a new name/);
    expect(sandbox.files.getText("a.txt")).toBe("a\n");
    expect(sandbox.files.getText("b.txt")).toBe("b\n");
  });

  it("refuses to delete a file whose content is not all removed by the patch", async () => {
    const sandbox = new MemorySandbox({ files: { "d.txt": "keep\nold\n" } });
    const { call, text } = toolHarness(sandbox);
    const result = await call("apply_patch", {
      patch: "--- a/d.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-old\n",
    });
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(/do not remove all of its content/);
    expect(sandbox.files.getText("d.txt")).toBe("keep\nold\n");
  });

  it("waits for a concurrent edit of the same file instead of overwriting it", async () => {
    const sandbox = new MemorySandbox({ files: { "c.txt": "a\nb\nc\nd\ne\nf\ng\n" } });
    const { call } = toolHarness(sandbox);
    const [patched, edited] = await Promise.all([
      call("apply_patch", { patch: "--- a/c.txt\n+++ b/c.txt\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n" }),
      call("edit", { path: "c.txt", old_text: "g", new_text: "G" }),
    ]);
    expect(patched.isError).toBe(false);
    expect(edited.isError).toBe(false);
    expect(sandbox.files.getText("c.txt")).toBe("A\nb\nc\nd\ne\nf\nG\n");
  });

  it("tells the model where a hunk was applied away from its header line", async () => {
    const sandbox = new MemorySandbox({ files: { "o.txt": "0\n1\n2\n3\n4\n5\n" } });
    const { call, text } = toolHarness(sandbox);
    const result = await call("apply_patch", {
      patch: "--- a/o.txt\n+++ b/o.txt\n@@ -1,2 +1,2 @@\n 4\n-5\n+five\n",
    });
    expect(text(result)).toMatch(
      /Notes:\n- o\.txt: hunk 1 \(@@ -1,2 \+1,2 @@\) applied at line 5 \(4 line\(s\) later/,
    );
    expect(sandbox.files.getText("o.txt")).toBe("0\n1\n2\n3\n4\nfive\n");
  });

  it("explains a patch it cannot read", async () => {
    const { call, text } = toolHarness(new MemorySandbox());
    const result = await call("apply_patch", { patch: "change line 3 to foo" });
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(
      /^Could not read the patch \(line 1: no file changes found.*Nothing was changed\.$/s,
    );
  });

  it("rolls back files already written when a later write fails (read-only mount)", async () => {
    const sandbox = new MemorySandbox({
      files: { "w.txt": "w\n", "/agent/r.txt": "r\n" },
      readOnly: ["/agent"],
    });
    const { call, text } = toolHarness(sandbox);
    const patch = [
      "--- a/w.txt",
      "+++ b/w.txt",
      "@@ -1 +1 @@",
      "-w",
      "+W",
      "--- /dev/null",
      "+++ b/new.txt",
      "@@ -0,0 +1 @@",
      "+n",
      "--- a//agent/r.txt",
      "+++ b//agent/r.txt",
      "@@ -1 +1 @@",
      "-r",
      "+R",
    ].join("\n");
    const result = await call("apply_patch", { patch });
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(/read-only mount \(\/agent is read-only in workspaceAccess ro\)/);
    expect(text(result)).toMatch(
      /The 2 file\(s\) already written were restored; nothing is changed\./,
    );
    expect(sandbox.files.getText("w.txt")).toBe("w\n");
    expect(sandbox.files.has("new.txt")).toBe(false);
    expect(sandbox.files.getText("/agent/r.txt")).toBe("r\n");
  });

  it("says which files could not be restored when the rollback fails too", async () => {
    const sandbox = new MemorySandbox({ files: { "a.txt": "a\n", "b.txt": "b\n" } });
    const writeFile = sandbox.files.writeFile.bind(sandbox.files);
    let writes = 0;
    sandbox.files.writeFile = async (path, data, options) => {
      writes++;
      // First write succeeds, second fails, the rollback write of the first fails as well.
      if (writes >= 2)
        throw new FileOperationError("disk full", "other", sandbox.files.resolve(path));
      return writeFile(path, data, options);
    };
    const { call, text } = toolHarness(sandbox);
    const patch =
      "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-b\n+B\n";
    const result = await call("apply_patch", { patch });
    expect(result.isError).toBe(true);
    expect(text(result)).toMatch(
      /Restoring the files already written failed for: \/workspace\/a\.txt: .*disk full/,
    );
  });

  it("applies several patches of one file in one patch in order", async () => {
    const sandbox = new MemorySandbox({ files: { "x.txt": "1\n2\n3\n" } });
    const { call } = toolHarness(sandbox);
    const patch =
      "--- a/x.txt\n+++ b/x.txt\n@@ -1 +1 @@\n-1\n+one\n--- a/x.txt\n+++ b/x.txt\n@@ -1,2 +1,2 @@\n one\n-2\n+two\n";
    expect((await call("apply_patch", { patch })).isError).toBe(false);
    expect(sandbox.files.getText("x.txt")).toBe("one\ntwo\n3\n");
  });

  it("keeps CRLF, BOM and no-final-newline files as they are", async () => {
    const sandbox = new MemorySandbox({ files: { "w.txt": "\uFEFFa\r\nb\r\n", "n.txt": "a\nb" } });
    const { call } = toolHarness(sandbox);
    const patch =
      "--- a/w.txt\n+++ b/w.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n\\ No newline at end of file\n";
    expect((await call("apply_patch", { patch })).isError).toBe(false);
    expect(sandbox.files.getText("w.txt")).toBe("\uFEFFa\r\nB\r\n");
    expect(sandbox.files.getText("n.txt")).toBe("A\nb");
  });

  it("patches hostile file names", async () => {
    const names = ["sp ace.txt", "-dash.txt", "ünï ✓.txt", "quote'\"s.txt", "$(id).txt"];
    const sandbox = new MemorySandbox({
      files: Object.fromEntries(names.map((n) => [n, "old\n"])),
    });
    const { call } = toolHarness(sandbox);
    const patch = names
      .map((name) =>
        createUnifiedDiff({ oldText: "old\n", newText: "new\n", oldPath: name, newPath: name }),
      )
      .join("");
    const newline = '--- /dev/null\n+++ "b/new\\nline.txt"\n@@ -0,0 +1 @@\n+x\n';
    const result = await call("apply_patch", { patch: patch + newline });
    expect(result.isError).toBe(false);
    for (const name of names) expect(sandbox.files.getText(name)).toBe("new\n");
    expect(sandbox.files.getText("new\nline.txt")).toBe("x\n");
  });

  it("applies a large generated patch to a large file", async () => {
    const oldText = Array.from({ length: 20_000 }, (_, i) => `row ${i}`).join("\n") + "\n";
    const newText = oldText.replace(/row (\d*7)\n/g, "ROW $1\n");
    const sandbox = new MemorySandbox({ files: { "big.txt": oldText } });
    const { call, text } = toolHarness(sandbox);
    const patch = createUnifiedDiff({ oldText, newText, oldPath: "big.txt", newPath: "big.txt" });
    const result = await call("apply_patch", { patch });
    expect(text(result)).toMatch(/M big\.txt \(\+2000 -2000\)/);
    expect(sandbox.files.getText("big.txt")).toBe(newText);
  });

  it("updates the read state so a following edit is not refused as stale", async () => {
    const sandbox = new MemorySandbox({ files: { "s.txt": "a\nb\n" } });
    const { call } = toolHarness(sandbox);
    await call("read", { path: "s.txt" });
    await call("apply_patch", { patch: "--- a/s.txt\n+++ b/s.txt\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n" });
    expect((await call("edit", { path: "s.txt", old_text: "b", new_text: "B" })).isError).toBe(
      false,
    );
    expect(sandbox.files.getText("s.txt")).toBe("A\nB\n");
  });

  it("refuses binary targets and directories", async () => {
    const sandbox = new MemorySandbox({ files: { "b.bin": new Uint8Array([0, 1, 2]), "d/x": "" } });
    const { call, text } = toolHarness(sandbox);
    expect(
      text(await call("apply_patch", { patch: "--- a/b.bin\n+++ b/b.bin\n@@ -1 +1 @@\n-a\n+b\n" })),
    ).toMatch(/b\.bin is a binary file/);
    expect(
      text(await call("apply_patch", { patch: "--- a/d\n+++ b/d\n@@ -1 +1 @@\n-a\n+b\n" })),
    ).toMatch(/d is a directory/);
  });
});
