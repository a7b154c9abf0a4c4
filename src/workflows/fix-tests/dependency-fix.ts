/**
 * The fix for a dependency the sandbox lacks, in the project's own terms: the package manager its
 * lockfile names, the Python packaging it has, `go mod download` for a Go module. A fix that names
 * npm to a pnpm project, or pip for a module Debian packages, sends the user the wrong way.
 */

import { imageThatHas, projectImageRecipe } from "./system-tools.js";

/** Which dependencies are missing: a Node package, a Python module, a Go module, or unknown. */
export type Ecosystem = "node" | "python" | "go";

const npmRegistry = "--setup-allow-host registry.npmjs.org";
const pypiHosts = "--setup-allow-host pypi.org --setup-allow-host files.pythonhosted.org";
const goProxyHosts = "--setup-allow-host proxy.golang.org --setup-allow-host sum.golang.org";
const imageFix = `or ${imageThatHas("them")}`;

/** The install command of the Node package manager the lockfile names (npm without one). */
function nodeInstall(files: ReadonlySet<string>): { command: string; tool?: string } {
  if (files.has("pnpm-lock.yaml")) {
    return { command: "pnpm install --frozen-lockfile", tool: "pnpm" };
  }
  if (files.has("yarn.lock")) {
    // Yarn 2+ (a .yarnrc.yml beside the lockfile) refuses --frozen-lockfile's old meaning.
    const flag = files.has(".yarnrc.yml") ? "--immutable" : "--frozen-lockfile";
    return { command: `yarn install ${flag}`, tool: "yarn" };
  }
  if (files.has("bun.lockb") || files.has("bun.lock")) {
    return { command: "bun install --frozen-lockfile", tool: "bun" };
  }
  return { command: files.has("package-lock.json") ? "npm ci" : "npm install" };
}

function nodeFix(files: ReadonlySet<string>): string {
  const { command, tool } = nodeInstall(files);
  const needsTool = tool
    ? ` (${tool} must be in the image: \`corepack enable\` or \`npm install -g ${tool}\` in a project image)`
    : "";
  return `carry the installed packages into the sandbox (\`--carry node_modules\`), install them before the tests with \`--setup-cmd "${command}" ${npmRegistry}\`${needsTool}, ${imageFix}`;
}

function pythonInstall(files: ReadonlySet<string>): string {
  if (files.has("requirements.txt")) return "pip install -r requirements.txt";
  return files.has("pyproject.toml") || files.has("setup.py")
    ? "pip install ."
    : "pip install -r requirements.txt";
}

/**
 * Python: Debian packages most libraries as `python3-<name>` (python3-yaml, python3-requests), and
 * a two-line project image with it works offline for every run; pip needs PyPI at each setup.
 */
function pythonFix(files: ReadonlySet<string>, module: string | undefined): string {
  const debian = module
    ? `python3-${(module.split(".")[0] ?? module).toLowerCase().replace(/_/g, "-")}`
    : undefined;
  const recipe = debian
    ? `; if Debian packages it (\`apt-cache show ${debian}\`), ${projectImageRecipe([debian])}`
    : "";
  return `carry the project's virtualenv into the sandbox (\`--carry .venv\`), install it before the tests with \`--setup-cmd "${pythonInstall(files)}" ${pypiHosts}\`, ${imageFix}${recipe}`;
}

function goFix(): string {
  return `download the module's dependencies before the tests with \`--setup-cmd "go mod download" ${goProxyHosts}\` (they stay in the sandbox's module cache), carry a vendor directory (\`go mod vendor\`, committed), ${imageFix}`;
}

/** The generic fix when the project's packaging is not known. */
const anyFix = `carry the project's installed dependencies into the sandbox (\`--carry node_modules\`, \`--carry .venv\`), install them before the tests with \`--setup-cmd\` (e.g. \`--setup-cmd "npm ci" ${npmRegistry}\`, or \`--setup-cmd "pip install -r requirements.txt" ${pypiHosts}\`), ${imageFix}`;

/**
 * The fix for missing dependencies of `ecosystem` (undefined: whichever the project has), from
 * the workspace's top-level file names. `module`: a missing Python module's name, for the Debian
 * package recipe.
 */
export function dependencyFix(options: {
  projectNames: ReadonlySet<string>;
  ecosystem?: Ecosystem | undefined;
  module?: string | undefined;
}): string {
  const files = options.projectNames;
  const present: Ecosystem[] = [];
  if (files.has("package.json")) present.push("node");
  if (["requirements.txt", "pyproject.toml", "setup.py", "setup.cfg"].some((f) => files.has(f))) {
    present.push("python");
  }
  if (files.has("go.mod")) present.push("go");
  const ecosystem = options.ecosystem ?? (present.length === 1 ? present[0] : undefined);
  switch (ecosystem) {
    case "node":
      return nodeFix(files);
    case "python":
      return pythonFix(files, options.module);
    case "go":
      return goFix();
    default:
      return anyFix;
  }
}
