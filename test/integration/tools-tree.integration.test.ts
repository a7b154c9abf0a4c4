import { afterAll, beforeAll, describe, expect, it } from "vitest";

import {
  createToolRunner,
  startDockerToolSandbox,
  type DockerToolSandbox,
  type ToolRunner,
} from "../support/tool-runner.js";

/**
 * apply_patch, ls, find and grep through the toolset, against one real hardened container. The
 * trees are made with exec inside the container and checked there.
 */
describe("tree tools over DockerSandbox", () => {
  let box: DockerToolSandbox;
  let tools: ToolRunner;

  beforeAll(async () => {
    box = await startDockerToolSandbox({ name: "tools-tree" });
    tools = createToolRunner({ sandbox: box.sandbox });
    // 20 directories × 1000 one-line files, made in one exec, on the container's tmpfs: creating
    // 20 000 files on a bind-mounted host directory takes tens of seconds on a busy disk.
    await sh(
      "mkdir /tmp/tree && cd /tmp/tree && for d in $(seq -w 0 19); do mkdir d$d && (cd d$d && seq 1 1000 | sed 's/^/needle /' | split -l 1 -a 3 --additional-suffix=.txt - f); done",
    );
  });

  afterAll(async () => {
    await box?.dispose();
  });

  async function sh(command: string): Promise<string> {
    const result = await box.sandbox.exec(command);
    expect(result.exitCode, `${command}\n${result.stderr}`).toBe(0);
    return result.stdout;
  }

  describe("apply_patch", () => {
    const files = "cd p && find . -type f | sort | xargs -d '\\n' sha256sum";

    beforeAll(async () => {
      await sh(
        "mkdir p && cd p && printf 'one\\ntwo\\nthree\\n' > a.txt && printf 'gone\\n' > b.txt && printf 'keep\\nold\\n' > c.txt",
      );
    });

    /** A patch that modifies a.txt, deletes b.txt, renames c.txt to d.txt (changed), adds sub/e.txt. */
    function patch(aContext: string): string {
      return [
        "diff --git a/p/a.txt b/p/a.txt",
        "--- a/p/a.txt",
        "+++ b/p/a.txt",
        "@@ -1,3 +1,3 @@",
        ` ${aContext}`,
        "-two",
        "+TWO",
        " three",
        "diff --git a/p/b.txt b/p/b.txt",
        "deleted file mode 100644",
        "--- a/p/b.txt",
        "+++ /dev/null",
        "@@ -1 +0,0 @@",
        "-gone",
        "diff --git a/p/c.txt b/p/d.txt",
        "similarity index 50%",
        "rename from p/c.txt",
        "rename to p/d.txt",
        "--- a/p/c.txt",
        "+++ b/p/d.txt",
        "@@ -1,2 +1,2 @@",
        " keep",
        "-old",
        "+new",
        "diff --git a/p/sub/e.txt b/p/sub/e.txt",
        "new file mode 100644",
        "--- /dev/null",
        "+++ b/p/sub/e.txt",
        "@@ -0,0 +1,2 @@",
        "+added",
        "+file",
        "",
      ].join("\n");
    }

    it("applies nothing when one hunk does not apply, and names the hunk", async () => {
      const before = await sh(files);
      const text = await tools.fail("apply_patch", { patch: patch("ONE (not in the file)") });
      expect(text).toMatch(/^The patch does not apply; nothing was changed\. 1 problem\(s\):/);
      expect(text).toMatch(/- p\/a\.txt \(patch line \d+\): hunk 1 @@ -1,3 \+1,3 @@/);
      expect(await sh(files)).toBe(before);
    });

    it("rolls back files already written when a later write is refused by the container", async () => {
      const before = await sh(files);
      const hostname = (await sh("cat /etc/hostname")).trimEnd();
      // Every file reads fine, so the patch is planned whole; /etc/hostname, last, cannot be
      // written by uid 1000 on a read-only root.
      const text = await tools.fail("apply_patch", {
        patch: [
          patch("one").trimEnd(),
          "--- a/../../etc/hostname",
          "+++ b/../../etc/hostname",
          "@@ -1 +1 @@",
          `-${hostname}`,
          "+evil",
          "",
        ].join("\n"),
      });
      expect(text).toMatch(
        /^Writing the patched files failed: Cannot modify \/etc\/hostname: it is on a read-only mount/,
      );
      expect(text).toContain("The 3 file(s) already written were restored; nothing is changed.");
      expect(await sh(files)).toBe(before);
      expect(await sh("cat /etc/hostname")).toBe(`${hostname}\n`);
    });

    it("applies a multi-file modify, delete, rename and add as one change", async () => {
      const text = await tools.ok("apply_patch", { patch: patch("one") });
      expect(text.split("\n")).toEqual([
        "Applied the patch (4 file change(s)):",
        "M p/a.txt (+1 -1)",
        "D p/b.txt",
        "R p/c.txt → p/d.txt (+1 -1)",
        "A p/sub/e.txt (+2 -0)",
      ]);
      expect(await sh("cd p && find . -type f | sort && cat a.txt d.txt sub/e.txt")).toBe(
        "./a.txt\n./d.txt\n./sub/e.txt\none\nTWO\nthree\nkeep\nnew\nadded\nfile\n",
      );
    });

    it("explains a patch it cannot read", async () => {
      expect(await tools.fail("apply_patch", { patch: "just some text" })).toMatch(
        /^Could not read the patch \(.*\)\. Nothing was changed\.$/,
      );
    });
  });

  describe("ls, find and grep on a tree of 20 000 files", () => {
    it("ls bounds a deep listing with a 'more' marker and lists a small one whole", async () => {
      const deep = (await tools.ok("ls", { path: "/tmp/tree", depth: 2 })).split("\n");
      expect(deep[0]).toBe("/tmp/tree:");
      expect(deep).toHaveLength(502);
      expect(deep[1]).toBe("d00/");
      expect(deep.at(-1)).toMatch(/^\[… more entries not shown \(stopped at 500\)\./);

      const top = (await tools.ok("ls", { path: "/tmp/tree" })).split("\n");
      expect(top).toHaveLength(21);
      expect(top.at(-1)).toBe("d19/");
      expect(await tools.ok("ls", { path: "/tmp/tree/d00/faaa.txt" })).toBe(
        "/tmp/tree/d00/faaa.txt is a file (9 bytes), not a directory.",
      );
      expect(await tools.fail("ls", { path: "/tmp/tree", depth: 11 })).toContain("- depth:");
    });

    it("find bounds its result with a 'more' marker; a narrow glob returns exactly its matches", async () => {
      const all = (await tools.ok("find", { pattern: "*.txt", path: "/tmp/tree" })).split("\n");
      expect(all).toHaveLength(501);
      // ripgrep walks in parallel: which 500 are shown is not fixed, only that they are real.
      expect(all.slice(0, 500).every((line) => /^d\d\d\/f[a-z]{3}\.txt$/.test(line))).toBe(true);
      expect(all.at(-1)).toMatch(/^\[… more matches not shown \(stopped at 500\)\./);

      const narrow = await tools.ok("find", { pattern: "d1[89]/fab{c,d}.txt", path: "/tmp/tree" });
      expect(narrow.split("\n")).toEqual([
        "d18/fabc.txt",
        "d18/fabd.txt",
        "d19/fabc.txt",
        "d19/fabd.txt",
      ]);
      expect(await tools.ok("find", { pattern: "*.rs", path: "/tmp/tree" })).toBe(
        "No files match *.rs under /tmp/tree.",
      );
    });

    it("grep bounds its matches with a 'more' marker; an anchored regex finds one line per directory", async () => {
      const all = (await tools.ok("grep", { pattern: "needle", path: "/tmp/tree" })).split("\n");
      expect(all).toHaveLength(301);
      expect(all.at(-1)).toMatch(/^\[… more matches not shown \(stopped at 300\)\./);

      const exact = (await tools.ok("grep", { pattern: "^needle 777$", path: "/tmp/tree" }))
        .split("\n")
        .sort();
      expect(exact).toHaveLength(20);
      expect(exact[0]).toMatch(/^\/tmp\/tree\/d00\/f[a-z]{3}\.txt:1:needle 777$/);
    });
  });

  describe("hostile patterns and names", () => {
    beforeAll(async () => {
      await sh(
        [
          "mkdir odd && cd odd",
          `printf '%s\\n' "it's \\"quoted\\"" '--foo bar' '-e not an option' 'a.b*c(d)[e]{f}' '$(touch /tmp/pwned) \`touch /tmp/pwned\`' > quotes.txt`,
          "printf 'needle-odd\\n' > 'with space.txt'",
          "printf 'needle-odd\\n' > $'new\\nline.txt'",
          "printf 'needle-odd\\n' > -dash.txt",
          "printf 'needle-odd\\n' > \"it's.md\"",
        ].join(" && "),
      );
    });

    it("grep passes patterns with quotes, leading dashes and regex characters exactly", async () => {
      const grep = (pattern: string, extra: object = {}): Promise<string> =>
        tools.ok("grep", { pattern, path: "odd/quotes.txt", ...extra });
      expect(await grep(`it's "quoted"`)).toBe(`odd/quotes.txt:1:it's "quoted"`);
      expect(await grep("--foo")).toBe("odd/quotes.txt:2:--foo bar");
      expect(await grep("-e")).toBe("odd/quotes.txt:3:-e not an option");
      expect(await grep("a\\.b\\*c\\(d\\)\\[e\\]\\{f\\}")).toBe("odd/quotes.txt:4:a.b*c(d)[e]{f}");
      expect(await grep("\\$\\(touch /tmp/pwned\\)")).toMatch(/^odd\/quotes\.txt:5:\$\(touch/);
      expect(await grep("IT'S", { ignore_case: true })).toBe(`odd/quotes.txt:1:it's "quoted"`);
      expect(await tools.ok("grep", { pattern: "$(touch /tmp/pwned)", path: "odd" })).toMatch(
        /^No matches/,
      );
      expect(await tools.fail("grep", { pattern: "(unclosed", path: "odd" })).toMatch(
        /^grep failed: .*regex parse error/s,
      );
      expect(await box.sandbox.files.stat("/tmp/pwned")).toBeUndefined();
    });

    it("find and grep keep names with spaces, newlines and leading dashes whole", async () => {
      expect((await tools.ok("find", { pattern: "*", path: "odd" })).split("\n")).toEqual([
        "-dash.txt",
        "it's.md",
        '"new\\nline.txt"',
        "quotes.txt",
        "with space.txt",
      ]);
      expect(await tools.ok("find", { pattern: "it's*", path: "odd" })).toBe("it's.md");
      const grep = (await tools.ok("grep", { pattern: "needle-odd", path: "odd" }))
        .split("\n")
        .sort();
      expect(grep).toEqual([
        '"odd/new\\nline.txt":1:needle-odd',
        "odd/-dash.txt:1:needle-odd",
        "odd/it's.md:1:needle-odd",
        "odd/with space.txt:1:needle-odd",
      ]);
      expect(await tools.ok("grep", { pattern: "needle-odd", path: "odd", glob: "*.md" })).toBe(
        "odd/it's.md:1:needle-odd",
      );
      expect(await tools.ok("grep", { pattern: "needle", path: "odd/-dash.txt" })).toBe(
        "odd/-dash.txt:1:needle-odd",
      );
      const patch = [
        "--- a/odd/-dash.txt",
        "+++ b/odd/-dash.txt",
        "@@ -1 +1 @@",
        "-needle-odd",
        "+patched-dash",
        "--- a/odd/with space.txt",
        "+++ b/odd/with space.txt",
        "@@ -1 +1 @@",
        "-needle-odd",
        "+patched-space",
        "",
      ].join("\n");
      await tools.ok("apply_patch", { patch });
      await tools.ok("edit", { path: "odd/new\nline.txt", old_text: "needle", new_text: "edited" });
      expect(await sh("cd odd && cat -- -dash.txt 'with space.txt' $'new\\nline.txt'")).toBe(
        "patched-dash\npatched-space\nedited-odd\n",
      );

      const ls = await tools.ok("ls", { path: "odd" });
      expect(ls.split("\n")).toContain('"new\\nline.txt"  (11 B)');
      expect(ls.split("\n")).toContain("-dash.txt  (13 B)");
    });
  });
});
