import { createHash } from "node:crypto";
import { mkdir, mkdtemp, realpath, rm, symlink, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

import { extract } from "tar-stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

import { ContextSnapshot, contextDockerfileName, readWorkspaceFile } from "./build-context.js";

/** name → content (files) or "-> target" (links) of a context as the engine would receive it. */
async function sent(snapshot: ContextSnapshot): Promise<Record<string, string>> {
  const entries: Record<string, string> = {};
  const reader = extract();
  const done = new Promise<void>((resolve, reject) => {
    reader.on("entry", (header, stream, next) => {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: unknown) => chunks.push(chunk as Buffer));
      stream.on("end", () => {
        if (header.type === "symlink") entries[header.name] = `-> ${header.linkname}`;
        else if (header.type === "file") entries[header.name] = Buffer.concat(chunks).toString();
        next();
      });
      stream.resume();
    });
    reader.on("finish", resolve);
    reader.on("error", reject);
  });
  snapshot.tar(Buffer.from("FROM x\n")).pipe(reader);
  await done;
  return entries;
}

async function hashOf(snapshot: ContextSnapshot): Promise<string> {
  const hash = createHash("sha256");
  await snapshot.hashInto(hash);
  return hash.digest("hex");
}

describe("build contexts", () => {
  let root: string;
  let workspace: string;
  let context: string;
  let secret: string;
  let snapshots: string[];

  const take = async (): Promise<ContextSnapshot> => {
    const into = await mkdtemp(path.join(root, "snapshot-"));
    snapshots.push(into);
    return ContextSnapshot.take({ workspace, context, into });
  };

  beforeEach(async () => {
    root = await realpath(await mkdtemp(path.join(tmpdir(), "cordon-context-")));
    workspace = path.join(root, "repo");
    context = path.join(workspace, ".cordon");
    secret = path.join(root, "host-secret");
    snapshots = [];
    await mkdir(context, { recursive: true });
    await writeFile(secret, "HOST SECRET\n");
    await writeFile(path.join(context, "Dockerfile"), "FROM cordon-sandbox:latest\n");
    await writeFile(path.join(context, "requirements.txt"), "pyyaml==6.0.1\n");
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("sends links as links and never what they point at, whatever .dockerignore re-includes", async () => {
    await symlink(secret, path.join(context, "absolute"));
    await symlink("../../host-secret", path.join(context, "relative"));
    await symlink("/etc", path.join(context, "etc"));
    await writeFile(
      path.join(context, ".dockerignore"),
      `*\n!*\n!../host-secret\n!${secret}\n!etc/**\n`,
    );
    const entries = await sent(await take());
    expect(entries).toEqual({
      ".dockerignore": expect.any(String) as unknown,
      Dockerfile: "FROM cordon-sandbox:latest\n",
      "requirements.txt": "pyyaml==6.0.1\n",
      absolute: `-> ${secret}`,
      relative: "-> ../../host-secret",
      etc: "-> /etc",
      [contextDockerfileName]: "FROM x\n",
    });
    expect(JSON.stringify(entries)).not.toContain("HOST SECRET");
  });

  it("honours .dockerignore, and hashes content and modes but not times", async () => {
    await mkdir(path.join(context, "node_modules", "left-pad"), { recursive: true });
    await writeFile(path.join(context, "node_modules", "left-pad", "index.js"), "x");
    await writeFile(path.join(context, ".env"), "TOKEN=1\n");
    await writeFile(path.join(context, ".dockerignore"), "node_modules\n.env\n");
    const first = await take();
    expect(Object.keys(await sent(first)).sort()).toEqual(
      [".dockerignore", "Dockerfile", "requirements.txt", contextDockerfileName].sort(),
    );
    const before = await hashOf(first);

    await utimes(path.join(context, "requirements.txt"), new Date(0), new Date(0));
    await writeFile(path.join(context, ".env"), "TOKEN=2\n");
    expect(await hashOf(await take())).toBe(before);

    await writeFile(path.join(context, "requirements.txt"), "pyyaml==6.0.2\n");
    expect(await hashOf(await take())).not.toBe(before);
  });

  it("refuses a context, Dockerfile or .dockerignore reached through a link", async () => {
    await symlink(secret, path.join(context, "linked.Dockerfile"));
    await expect(
      readWorkspaceFile(workspace, path.join(context, "linked.Dockerfile"), "the Dockerfile"),
    ).rejects.toThrow(/is a symbolic link/);
    await symlink(root, path.join(workspace, "up"));
    await expect(
      readWorkspaceFile(workspace, path.join(workspace, "up", "host-secret"), "the Dockerfile"),
    ).rejects.toThrow(/not a regular file of the workspace \(it resolves to .*host-secret\)/);
    await expect(readWorkspaceFile(workspace, secret, "the Dockerfile")).rejects.toThrow(
      /outside the workspace/,
    );

    await symlink(secret, path.join(context, ".dockerignore"));
    await expect(take()).rejects.toThrow(/\.dockerignore .* is a symbolic link/);

    await symlink("/etc", path.join(workspace, "etc-context"));
    await expect(
      ContextSnapshot.take({ workspace, context: path.join(workspace, "etc-context"), into: root }),
    ).rejects.toThrow(/reached through a symbolic link \(it resolves to \/etc\)/);
  });
});
