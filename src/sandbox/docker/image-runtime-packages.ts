import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";

import { z } from "zod";

import { ImageError } from "../../common/index.js";

const run = promisify(execFile);

/** One pinned npm package: what `npm pack` fetches and the integrity it must have. */
const pinnedPackage = z.object({
  name: z.string().min(1),
  integrity: z.string().startsWith("sha512-"),
});

/**
 * images/node-runtime.json: the npm registry packages the sandbox image takes Node.js and npm
 * from, each pinned to a version and an sha512 integrity, per CPU architecture (`any` for
 * architecture-independent ones). Each entry becomes `<key>.tgz` in the build context.
 */
const runtimePins = z.record(
  z.string().regex(/^[a-z]+$/),
  z.object({
    version: z.string().min(1),
    packages: z.record(z.string(), pinnedPackage),
  }),
);

/** A tarball fetched for the build context, checked against its pin. */
export interface RuntimePackageFile {
  /** Its name in the build context, e.g. `node.tgz`. */
  contextName: string;
  /** Where it was written on the host. */
  path: string;
  /** `name@version`, for messages. */
  spec: string;
}

/** Docker's `Architecture` (uname -m) to npm's `process.arch` names. */
const npmArchitectureOf: Readonly<Record<string, string>> = {
  x86_64: "x64",
  amd64: "x64",
  aarch64: "arm64",
  arm64: "arm64",
};

const registryFix =
  "make the npm registry reachable from this machine (`npm ping`; behind a proxy set npm's `proxy`/`https-proxy` and `cafile`), or set CORDON_BASE_IMAGE to an image you built yourself";

export async function readRuntimePins(file: string): Promise<z.infer<typeof runtimePins>> {
  const text = await readFile(file, "utf8").catch((error: unknown) => {
    throw new ImageError(`cannot read ${file}`, { cause: error });
  });
  const parsed = runtimePins.safeParse(JSON.parse(text));
  if (!parsed.success) {
    throw new ImageError(
      `${file} is not a valid list of pinned packages: ${parsed.error.message}`,
      {
        fix: "restore images/node-runtime.json from cordon's package",
      },
    );
  }
  return parsed.data;
}

/**
 * Fetches every pinned package for `engineArchitecture` into `directory` with the host's npm
 * (so the user's registry, proxy and CA settings apply) and checks each file's sha512 against
 * its pin: a tampered mirror or a republished version fails the build instead of entering the
 * image.
 */
export async function fetchRuntimePackages(
  pinsFile: string,
  engineArchitecture: string,
  directory: string,
  signal?: AbortSignal,
): Promise<RuntimePackageFile[]> {
  const pins = await readRuntimePins(pinsFile);
  const arch = npmArchitectureOf[engineArchitecture] ?? engineArchitecture;
  const files: RuntimePackageFile[] = [];
  for (const [key, pin] of Object.entries(pins)) {
    const chosen = pin.packages[arch] ?? pin.packages["any"];
    if (!chosen) {
      throw new ImageError(
        `images/node-runtime.json has no ${key} package for the engine's architecture ${engineArchitecture}`,
        { fix: "set CORDON_BASE_IMAGE to an image you built yourself for this architecture" },
      );
    }
    const spec = `${chosen.name}@${pin.version}`;
    const fetched = await npmPack(spec, directory, signal);
    const actual = `sha512-${createHash("sha512")
      .update(await readFile(fetched))
      .digest("base64")}`;
    if (actual !== chosen.integrity) {
      throw new ImageError(
        `${spec} from the npm registry does not match its pinned integrity (got ${actual}, pinned ${chosen.integrity})`,
        {
          fix: "check which registry npm uses (`npm config get registry`); a mirror serving different bytes must not be trusted",
        },
      );
    }
    files.push({ contextName: `${key}.tgz`, path: fetched, spec });
  }
  return files;
}

async function npmPack(spec: string, directory: string, signal?: AbortSignal): Promise<string> {
  try {
    const { stdout } = await run(
      "npm",
      ["pack", spec, "--json", "--pack-destination", directory, "--loglevel=error"],
      { cwd: directory, maxBuffer: 64 * 1024 * 1024, ...(signal ? { signal } : {}) },
    );
    const [packed] = z.array(z.object({ filename: z.string() })).parse(JSON.parse(stdout));
    if (!packed) throw new Error("npm pack printed no file");
    return path.join(directory, path.basename(packed.filename));
  } catch (error) {
    const stderr = (error as { stderr?: unknown }).stderr;
    const detail = typeof stderr === "string" && stderr.trim() !== "" ? `: ${stderr.trim()}` : "";
    throw new ImageError(`cannot fetch ${spec} from the npm registry${detail}`, {
      fix: registryFix,
      cause: error,
    });
  }
}
