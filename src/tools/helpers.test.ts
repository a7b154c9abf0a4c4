import { describe, expect, it } from "vitest";
import { globToRegExp, matchesGlob } from "./glob.js";
import { pendingPathLocks, withPathLock, withPathLocks } from "./path-lock.js";
import { decodeText, displayPath, normalizeText, restoreText } from "./text-format.js";
import { HeadTailBuffer, truncateMiddle } from "./truncate.js";

describe("matchesGlob", () => {
  it.each([
    ["a.ts", "*.ts", true],
    ["src/deep/a.ts", "*.ts", true],
    ["src/a.tsx", "*.ts", false],
    ["src/a.ts", "src/*.ts", true],
    ["src/deep/a.ts", "src/*.ts", false],
    ["src/deep/a.ts", "src/**/*.ts", true],
    ["src/a.ts", "src/**/*.ts", true],
    ["src/a.js", "*.{ts,js}", true],
    ["b.md", "[ab].md", true],
    ["c.md", "[!ab].md", true],
    ["a.md", "[!ab].md", false],
    ["x1", "x?", true],
    ["x/1", "x?", false],
    ["weird (1).txt", "weird (1).txt", true],
    ["a+b.txt", "a+b.txt", true],
    ["new\nline.ts", "*.ts", true],
    ["./src/a.ts", "./src/a.ts", false],
    ["src/a.ts", "./src/a.ts", true],
    ["src/a.ts", "/src/a.ts", true],
  ])("%j against %j is %s", (path, pattern, expected) => {
    expect(matchesGlob(path, pattern)).toBe(expected);
  });

  it("treats regex metacharacters literally", () => {
    expect(globToRegExp("a.b").test("axb")).toBe(false);
    expect(globToRegExp("$^|()").test("$^|()")).toBe(true);
  });
});

describe("truncateMiddle", () => {
  it("leaves short text alone", () => {
    expect(truncateMiddle("abc", 10)).toEqual({ text: "abc", omitted: 0 });
  });

  it("keeps whole lines at the head and tail and counts what it dropped", () => {
    const text = Array.from({ length: 1000 }, (_, i) => `line ${i}`).join("\n");
    const { text: out, omitted } = truncateMiddle(text, 200);
    expect(out.startsWith("line 0\n")).toBe(true);
    expect(out.endsWith("line 999")).toBe(true);
    expect(out).toMatch(new RegExp(`\\[… ${omitted} characters omitted …\\]`));
    expect(out.length).toBeLessThan(260);
    const [head, tail] = out.split(/\n\[… \d+ characters omitted …\]\n/);
    expect((head?.length ?? 0) + (tail?.length ?? 0) + omitted).toBe(text.length);
  });
});

describe("HeadTailBuffer", () => {
  it("keeps the first and last halves of a stream in bounded memory", () => {
    const buffer = new HeadTailBuffer(100);
    for (let i = 0; i < 10_000; i++) buffer.append(`${i},`);
    const { text, omitted } = buffer.result();
    expect(text.startsWith("0,1,2,3,")).toBe(true);
    expect(text.endsWith("9998,9999,")).toBe(true);
    expect(text.length).toBeLessThan(150);
    expect(omitted + 100).toBe(buffer.totalChars);
  });

  it("is exact when nothing overflowed", () => {
    const buffer = new HeadTailBuffer(100);
    buffer.append("a".repeat(60));
    buffer.append("b".repeat(40));
    expect(buffer.result()).toEqual({ text: "a".repeat(60) + "b".repeat(40), omitted: 0 });
    expect(buffer.truncated).toBe(false);
  });
});

describe("text layout", () => {
  it.each([
    ["lf", "a\nb\n"],
    ["crlf", "a\r\nb\r\n"],
    ["bom crlf no final newline", "\uFEFFa\r\nb"],
    ["mixed endings kept as they are", "a\r\nb\nc\r\n"],
    ["empty", ""],
    ["only a newline", "\n"],
    ["no newline at all", "abc"],
  ])("normalize + restore is the identity for %s", (_name, text) => {
    const { body, layout } = normalizeText(text);
    expect(body.includes("\r\n") && layout.eol === "\r\n").toBe(false);
    expect(restoreText(body, layout)).toBe(text);
  });

  it("decodes UTF-8 strictly and refuses binary", () => {
    expect(decodeText(new TextEncoder().encode("ok ✓"))).toBe("ok ✓");
    expect(decodeText(new Uint8Array([0x61, 0, 0x62]))).toBeUndefined();
    expect(decodeText(new Uint8Array([0xc3, 0x28]))).toBeUndefined();
  });

  it("quotes names that would break a line-oriented listing", () => {
    expect(displayPath("plain name.txt")).toBe("plain name.txt");
    expect(displayPath("a\nb")).toBe('"a\\nb"');
    expect(displayPath(" lead")).toBe('" lead"');
    expect(displayPath("tab\t")).toBe('"tab\\t"');
  });
});

describe("withPathLock", () => {
  it("runs holders of one key in order, and different keys in parallel", async () => {
    const events: string[] = [];
    let releaseFirst!: () => void;
    const first = withPathLock({ sandboxId: "s", path: "/a" }, async () => {
      events.push("first start");
      await new Promise<void>((resolve) => (releaseFirst = resolve));
      events.push("first end");
    });
    const second = withPathLock({ sandboxId: "s", path: "/a" }, () => {
      events.push("second");
      return Promise.resolve();
    });
    const other = withPathLock({ sandboxId: "s", path: "/b" }, () => {
      events.push("other key");
      return Promise.resolve();
    });
    const otherSandbox = withPathLock({ sandboxId: "t", path: "/a" }, () => {
      events.push("other sandbox");
      return Promise.resolve();
    });
    await Promise.all([other, otherSandbox]);
    expect(events).toEqual(["first start", "other key", "other sandbox"]);
    releaseFirst();
    await Promise.all([first, second]);
    expect(events.slice(3)).toEqual(["first end", "second"]);
    expect(pendingPathLocks()).toBe(0);
  });

  it("releases the lock when the holder throws", async () => {
    await expect(
      withPathLock({ sandboxId: "s", path: "/x" }, () => Promise.reject(new Error("fail"))),
    ).rejects.toThrow("fail");
    await expect(
      withPathLock({ sandboxId: "s", path: "/x" }, () => Promise.resolve("next")),
    ).resolves.toBe("next");
    expect(pendingPathLocks()).toBe(0);
  });

  it("takes several locks in a fixed order so crossed requests do not deadlock", async () => {
    const results = await Promise.all([
      withPathLocks({ sandboxId: "s", paths: ["/p", "/q"] }, () => Promise.resolve(1)),
      withPathLocks({ sandboxId: "s", paths: ["/q", "/p"] }, () => Promise.resolve(2)),
      withPathLocks({ sandboxId: "s", paths: ["/q", "/q"] }, () => Promise.resolve(3)),
    ]);
    expect(results).toEqual([1, 2, 3]);
    expect(pendingPathLocks()).toBe(0);
  });
});
