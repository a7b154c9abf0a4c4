/**
 * Characters HFS+ ignores in names (git's is_hfs_dotgit): on a Mac ".g\u200cit" is ".git".
 */
const hfsIgnored = /[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/g;

/** Whether one name component is `.git` to some filesystem: any case, HFS+ and NTFS spellings. */
export function isDotGit(component: string): boolean {
  // NTFS drops trailing dots and spaces; `git~1` is the 8.3 short name of `.git`.
  const name = component
    .replace(hfsIgnored, "")
    .replace(/[. ]+$/, "")
    .toLowerCase();
  return name === ".git" || name === "git~1";
}
