/**
 * Glob matching with gitignore-like rules (what ripgrep's --glob does), for `find` when ripgrep
 * is not available: `*` and `?` stay within one path segment, `**` spans segments, `[...]` and
 * `{a,b}` work; a pattern without `/` matches the file name at any depth.
 */
export function globToRegExp(pattern: string): RegExp {
  let source = "";
  let i = 0;
  let braces = 0;
  while (i < pattern.length) {
    const ch = pattern[i] ?? "";
    if (ch === "*") {
      if (pattern[i + 1] === "*") {
        const slashAfter = pattern[i + 2] === "/";
        source += slashAfter ? "(?:.*/)?" : ".*";
        i += slashAfter ? 3 : 2;
        continue;
      }
      source += "[^/]*";
    } else if (ch === "?") {
      source += "[^/]";
    } else if (ch === "[") {
      const close = pattern.indexOf("]", i + 2);
      if (close === -1) {
        source += "\\[";
      } else {
        let body = pattern.slice(i + 1, close);
        if (body.startsWith("!")) body = `^${body.slice(1)}`;
        source += `[${body.replace(/\\/g, "\\\\")}]`;
        i = close;
      }
    } else if (ch === "{") {
      braces++;
      source += "(?:";
    } else if (ch === "}" && braces > 0) {
      braces--;
      source += ")";
    } else if (ch === "," && braces > 0) {
      source += "|";
    } else if (ch === "\\" && i + 1 < pattern.length) {
      source += escapeRegExp(pattern[i + 1] ?? "");
      i++;
    } else {
      source += escapeRegExp(ch);
    }
    i++;
  }
  return new RegExp(`^${source}$`, "s");
}

/** Whether a `/`-separated relative path matches the glob. */
export function matchesGlob(relativePath: string, pattern: string): boolean {
  const anchored = pattern.replace(/^\.\//, "").replace(/^\//, "");
  const regex = globToRegExp(anchored);
  if (!anchored.includes("/")) {
    const base = relativePath.slice(relativePath.lastIndexOf("/") + 1);
    return regex.test(base);
  }
  return regex.test(relativePath);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}
