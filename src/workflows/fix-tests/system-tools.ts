/**
 * Commands a test suite runs that no project dependency brings: a language's toolchain or a test
 * runner Debian packages, which cordon's image does not have (it has Node, Python, make and a C
 * toolchain: docs/images.md). Their fix is a project image, never `--carry` or a setup command:
 * telling a Go or Rust user to carry node_modules sends them the wrong way.
 */

/** The Debian package (bookworm, cordon's base) that installs each command. */
const debianPackages: Readonly<Record<string, string>> = {
  go: "golang-go",
  gofmt: "golang-go",
  cargo: "cargo",
  rustc: "rustc",
  cmake: "cmake",
  ctest: "cmake",
  ninja: "ninja-build",
  meson: "meson",
  bats: "bats",
  java: "default-jdk-headless",
  javac: "default-jdk-headless",
  mvn: "maven",
  gradle: "gradle",
  ruby: "ruby",
  rake: "rake",
  bundle: "ruby-bundler",
  rspec: "ruby-rspec",
  php: "php-cli",
  composer: "composer",
  phpunit: "phpunit",
  clang: "clang",
  valgrind: "valgrind",
  lua: "lua5.4",
  shellcheck: "shellcheck",
  tox: "tox",
};

/** The Debian package of a system tool the sandbox lacks; undefined for anything else. */
export function debianPackageOf(command: string): string | undefined {
  return Object.hasOwn(debianPackages, command) ? debianPackages[command] : undefined;
}

/** The project image that adds Debian `packages` to cordon's: three lines and one config key. */
export function projectImageRecipe(packages: readonly string[]): string {
  return `a project image needs three lines in .cordon/Dockerfile: \`FROM cordon-sandbox:latest\`, \`USER root\`, \`RUN apt-get update && apt-get install -y --no-install-recommends ${packages.join(" ")}\`, and sandbox.docker.dockerfile: ".cordon/Dockerfile" in cordon.json5 (docs/images.md)`;
}

/**
 * "use an image that has it" with the keys that make one: the words of every fix-tests fix that
 * sends the user to an image, `them` for dependencies, `it` for a tool or anything else.
 */
export function imageThatHas(what: "it" | "them"): string {
  return `use an image that has ${what} (sandbox.docker.image, sandbox.docker.dockerfile FROM cordon-sandbox:latest)`;
}
