#!/usr/bin/env bash
# Brings a machine to the point where cordon runs and its tests pass:
#   1. npm dependencies (installed when missing or stale)
#   2. the TypeScript build (dist/) and the resident executor (dist/executor, a static C binary);
#      and, for `npm run check`, shellcheck
#   3. a Docker engine (Debian's engine, installed and started when none answers and we are root)
#   4. the sandbox image (built by `cordon image build`, skipped when its inputs are unchanged;
#      a debootstrapped base when the official base image cannot be pulled)
#   5. with CORDON_RUNTIME=runsc: gVisor (Debian's runsc), registered with the engine and proven
#      to start a container (docs/gvisor.md)
# Idempotent: a second run does nothing but check. Each step prints what it does and how long it
# took; a failing step names the fix and exits non-zero. Nothing is skipped silently.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# Public defaults; the TypeScript side reads the same environment variables.
OFFICIAL_BASE="${CORDON_OFFICIAL_BASE_IMAGE:-debian:bookworm-slim}"
LOCAL_BASE="${CORDON_LOCAL_BASE_IMAGE:-cordon-base:bookworm}"
DEBIAN_MIRROR="${CORDON_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DOCKERD_LOG="${CORDON_DOCKERD_LOG:-/var/log/cordon-dockerd.log}"
# gVisor (CORDON_RUNTIME=runsc): the flags runsc runs with, and the daemon.json that registers it.
# The platform is KVM where runsc's KVM platform starts a sandbox, ptrace otherwise (see
# choose_runsc_platform); --network=host makes gVisor use the container's own network namespace
# (Docker's none or bridge) instead of its netstack, whose set-up fails in some VMs ("cannot run
# with network enabled in root network namespace").
RUNTIME="${CORDON_RUNTIME:-}"
RUNSC_FLAGS="${CORDON_RUNSC_FLAGS:-}"
RUNSC_PLATFORM_CACHE="${CORDON_RUNSC_PLATFORM_CACHE:-/var/cache/cordon/runsc-platform}"
DAEMON_JSON="${CORDON_DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}"

step_started=0
step() { step_started=$(date +%s%N); printf '==> %s\n' "$*" >&2; }
done_step() {
  local ms=$(( ($(date +%s%N) - step_started) / 1000000 ))
  printf '    %s (%d.%03ds)\n' "${1:-done}" $((ms / 1000)) $((ms % 1000)) >&2
}
fail() { printf '\nsetup failed: %s\n  fix: %s\n' "$1" "$2" >&2; exit 1; }

ensure_node() {
  step "checking Node.js"
  local version major minor
  version="$(node -p 'process.versions.node' 2>/dev/null)" ||
    fail "Node.js is not installed" "install Node.js 20.19 or newer (https://nodejs.org)"
  major="${version%%.*}"; minor="${version#*.}"; minor="${minor%%.*}"
  if (( major < 20 || (major == 20 && minor < 19) )); then
    fail "Node.js $version is too old" "install Node.js 20.19 or newer"
  fi
  done_step "node $version"
}

ensure_npm_dependencies() {
  step "npm dependencies"
  # A shared node_modules (a symlink, as in a git worktree) belongs to another checkout: npm ci
  # would empty it under that checkout's feet.
  if [[ -L node_modules ]]; then
    done_step "node_modules is a link to a shared install; left as it is"
    return
  fi
  # Stale means the lockfile's content changed since the last install, not its date (a merge or
  # checkout touches the date without changing anything).
  local marker=node_modules/.cordon-lock-sha256 wanted
  wanted="$(sha256sum package-lock.json | cut -d' ' -f1)"
  if [[ -f "$marker" && "$(cat "$marker")" == "$wanted" && -d node_modules/.bin ]]; then
    done_step "up to date"
    return
  fi
  # No marker, but npm's own record of the tree (written by the `npm ci` the README's install
  # step just ran) is newer than the lockfile: trust it once and record the content hash.
  if [[ ! -f "$marker" && node_modules/.package-lock.json -nt package-lock.json && -d node_modules/.bin ]]; then
    printf '%s\n' "$wanted" >"$marker"
    done_step "up to date (installed by npm)"
    return
  fi
  npm ci --no-audit --no-fund --loglevel=error >&2 ||
    fail "npm ci failed" "check network access to the npm registry, then rerun scripts/setup.sh"
  printf '%s\n' "$wanted" >"$marker"
  done_step "installed"
}

ensure_build() {
  step "building TypeScript (dist/)"
  node_modules/.bin/tsc -p tsconfig.build.json >&2 ||
    fail "the TypeScript build failed" "run 'npx tsc -p tsconfig.build.json' and fix the errors it prints"
  bash scripts/copy-shell-scripts.sh ||
    fail "copying the shell scripts into dist/ failed" "run 'bash scripts/copy-shell-scripts.sh' and fix what it prints"
  done_step "built"
}

ensure_executor() {
  step "resident executor (dist/executor/cordon-executor)"
  # Static, so it runs in any image; glibc's static libc comes with libc6-dev.
  if ! command -v gcc >/dev/null || [[ ! -e "$(gcc -print-file-name=libc.a)" ]]; then
    if [[ "$(id -u)" == 0 && -r /etc/debian_version ]] && command -v apt-get >/dev/null; then
      printf '    installing gcc and libc6-dev (apt-get)\n' >&2
      apt_install gcc libc6-dev ||
        fail "apt-get install gcc libc6-dev failed" "check access to Debian's package mirror, or set sandbox.docker.executor to \"exec\""
    else
      done_step "no C compiler: not built; sandboxes run every call by plain Docker exec (install gcc and libc6-dev for the faster resident executor)"
      return
    fi
  fi
  bash scripts/build-executor.sh >&2 ||
    fail "building the resident executor failed" "run 'bash scripts/build-executor.sh' and fix what it prints, or set sandbox.docker.executor to \"exec\""
  done_step "built"
}

docker_answers() { docker info >/dev/null 2>&1; }

# apt-get, with its chatter kept in a log that is shown only when it fails.
apt_install() {
  local log
  log="$(mktemp /tmp/cordon-apt.XXXXXX)"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    return 1
  fi
  rm -f "$log"
}

# Sets RUNSC_FLAGS unless CORDON_RUNSC_FLAGS did. KVM (system calls without a ptrace stop each) where
# /dev/kvm is usable and `runsc --platform=kvm do` really starts a sandbox within 8 s; the runsc
# Debian ships (2022-12) hangs there in nested VMs, as on the machines cordon is built on
# (docs/gvisor.md). The verdict is kept per runsc version and kernel, so a rerun does not wait again.
choose_runsc_platform() {
  [[ -z $RUNSC_FLAGS ]] || return 0
  local key platform=""
  key="$(runsc --version | head -n1) $(uname -r)"
  if [[ -f $RUNSC_PLATFORM_CACHE && "$(head -n1 "$RUNSC_PLATFORM_CACHE")" == "$key" ]]; then
    platform="$(sed -n 2p "$RUNSC_PLATFORM_CACHE")"
  fi
  if [[ -z $platform ]]; then
    platform=ptrace
    if [[ -c /dev/kvm && -w /dev/kvm ]] &&
      timeout -k 2 8 runsc --platform=kvm --network=none "do" /bin/true >/dev/null 2>&1; then
      platform=kvm
    fi
    # Only a cache: a read-only /var/cache means probing again next time.
    if mkdir -p "$(dirname "$RUNSC_PLATFORM_CACHE")" 2>/dev/null; then
      printf '%s\n%s\n' "$key" "$platform" >"$RUNSC_PLATFORM_CACHE" 2>/dev/null || true
    fi
  fi
  RUNSC_FLAGS="--platform=$platform --network=host"
}

# Writes the runsc entry of daemon.json's "runtimes", keeping everything else in the file; prints
# "changed" when it wrote something. A dockerd started later reads it; a running one on SIGHUP.
write_runsc_registration() {
  # RUNSC_FLAGS is a list of flags: split on purpose.
  # shellcheck disable=SC2086
  node - "$DAEMON_JSON" "$(command -v runsc)" $RUNSC_FLAGS <<'JS'
const fs = require("node:fs");
const path = require("node:path");
const [file, runsc, ...args] = process.argv.slice(2);
let config = {};
try {
  config = JSON.parse(fs.readFileSync(file, "utf8"));
} catch (error) {
  if (error.code !== "ENOENT") throw new Error(`${file} is not valid JSON: ${error.message}`);
}
const wanted = { path: runsc, runtimeArgs: args };
if (JSON.stringify(config.runtimes?.runsc) === JSON.stringify(wanted)) process.exit(0);
config.runtimes = { ...config.runtimes, runsc: wanted };
fs.mkdirSync(path.dirname(file), { recursive: true });
fs.writeFileSync(`${file}.cordon-tmp`, `${JSON.stringify(config, null, 2)}\n`);
fs.renameSync(`${file}.cordon-tmp`, file);
console.log("changed");
JS
}

engine_runtimes() { docker info --format '{{range $name, $_ := .Runtimes}}{{$name}} {{end}}' 2>/dev/null; }

# Before the engine step, so a dockerd that setup starts reads the registration at once.
ensure_gvisor_installed() {
  case "$RUNTIME" in
    "" | runc) return 0 ;;
    runsc) ;;
    *) fail "CORDON_RUNTIME=$RUNTIME is not a runtime setup knows" \
      "use CORDON_RUNTIME=runsc (gVisor), or register $RUNTIME with the engine yourself" ;;
  esac
  step "gVisor (runsc)"
  if ! command -v runsc >/dev/null; then
    { [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; } ||
      fail "runsc (gVisor) is not installed" "install gVisor (Debian: apt-get install runsc; https://gvisor.dev/docs/user_guide/install/), then rerun"
    apt_install runsc || fail "apt-get install runsc failed" "check access to Debian's package mirror"
  fi
  choose_runsc_platform
  runsc_registration_changed="$(write_runsc_registration)" ||
    fail "could not register runsc in $DAEMON_JSON" "fix or remove that file, then rerun scripts/setup.sh"
  done_step "$(runsc --version | head -n1); ${runsc_registration_changed:+registered in $DAEMON_JSON, }flags: $RUNSC_FLAGS"
}

# After the engine step: a running engine reloads daemon.json's runtimes on SIGHUP (no restart:
# the containers of other work keep running), then a container must really start under runsc.
ensure_gvisor_registered() {
  [[ "$RUNTIME" == runsc ]] || return 0
  step "gVisor registered with the engine"
  if [[ -n $runsc_registration_changed || " $(engine_runtimes) " != *" runsc "* ]]; then
    { [[ "$(id -u)" == 0 ]] && pidof dockerd >/dev/null; } ||
      fail "the engine does not run runsc with $DAEMON_JSON's flags" \
        "reload the engine's configuration (as root: kill -HUP \$(pidof dockerd); or restart Docker)"
    local pids
    read -r -a pids <<<"$(pidof dockerd)"
    kill -HUP "${pids[@]}"
    local deadline=$((SECONDS + 20))
    until [[ " $(engine_runtimes) " == *" runsc "* ]]; do
      (( SECONDS < deadline )) || fail "dockerd did not pick up runsc after SIGHUP" "read $DOCKERD_LOG"
      sleep 0.5
    done
  fi
  gvisor_starts ||
    fail "a container does not start under runsc: $gvisor_error" \
      "try other runsc flags in CORDON_RUNSC_FLAGS (now: $RUNSC_FLAGS); docs/gvisor.md"
  done_step "runsc starts containers (flags: $RUNSC_FLAGS)"
}

# The sandbox image under runsc with no network: what every cordon sandbox needs first.
runsc_registration_changed=""
gvisor_error=""
gvisor_starts() {
  gvisor_error="$(docker run --rm --runtime runsc --network none --entrypoint true cordon-sandbox:latest 2>&1)"
}

ensure_docker_engine() {
  step "Docker engine"
  if docker_answers; then
    done_step "running ($(docker version --format 'engine {{.Server.Version}}, API {{.Server.APIVersion}}' 2>/dev/null))"
    return
  fi
  local can_install=no
  if [[ "$(id -u)" == 0 && -r /etc/debian_version ]] && command -v apt-get >/dev/null; then
    can_install=yes
  fi
  if ! command -v dockerd >/dev/null; then
    [[ $can_install == yes ]] || fail "no Docker engine answers and none is installed" \
      "install Docker (https://docs.docker.com/engine/install/) and start it, or run this script as root on Debian/Ubuntu to install Debian's docker.io"
    printf '    installing Debian docker.io (apt-get)\n' >&2
    apt_install docker.io ||
      fail "apt-get install docker.io failed" "check access to Debian's package mirror, or install Docker by hand; then rerun scripts/setup.sh"
  fi
  if [[ "$(id -u)" != 0 ]]; then
    fail "the Docker daemon is installed but not answering" \
      "start it (e.g. 'sudo systemctl start docker') and make sure your user may use it"
  fi
  printf '    starting dockerd (log: %s)\n' "$DOCKERD_LOG" >&2
  # Fully detached: a daemon holding this script's stdout/stderr would keep CI from ever ending.
  setsid dockerd </dev/null >>"$DOCKERD_LOG" 2>&1 &
  local deadline=$((SECONDS + 60))
  until docker_answers; do
    (( SECONDS < deadline )) || fail "dockerd did not answer within 60s" "read $DOCKERD_LOG"
    sleep 0.5
  done
  done_step "started ($(docker version --format 'engine {{.Server.Version}}, API {{.Server.APIVersion}}'))"
}

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# The official base when a registry is reachable; otherwise a debootstrapped Debian bookworm,
# imported once and kept under $LOCAL_BASE.
ensure_base_image() {
  step "base image"
  if [[ -n "${CORDON_BASE_IMAGE:-}" ]]; then
    image_exists "$CORDON_BASE_IMAGE" || docker pull "$CORDON_BASE_IMAGE" >&2 ||
      fail "CORDON_BASE_IMAGE=$CORDON_BASE_IMAGE is not present and cannot be pulled" \
        "unset CORDON_BASE_IMAGE or build/load that image first"
    done_step "using CORDON_BASE_IMAGE=$CORDON_BASE_IMAGE"
    return
  fi
  if image_exists "$OFFICIAL_BASE"; then done_step "$OFFICIAL_BASE present"; return; fi
  if image_exists "$LOCAL_BASE"; then done_step "$LOCAL_BASE present (local debootstrap base)"; return; fi
  if timeout 60 docker pull "$OFFICIAL_BASE" >&2 2>/dev/null; then
    done_step "pulled $OFFICIAL_BASE"
    return
  fi
  printf '    %s cannot be pulled; building %s with debootstrap\n' "$OFFICIAL_BASE" "$LOCAL_BASE" >&2
  [[ "$(id -u)" == 0 ]] || fail "cannot pull $OFFICIAL_BASE and debootstrap needs root" \
    "make a registry reachable, or rerun scripts/setup.sh as root"
  if ! command -v debootstrap >/dev/null; then
    apt_install debootstrap ||
      fail "could not install debootstrap" "apt-get install debootstrap, then rerun scripts/setup.sh"
  fi
  local rootfs
  rootfs="$(mktemp -d /tmp/cordon-rootfs.XXXXXX)"
  if ! debootstrap --variant=minbase bookworm "$rootfs" "$DEBIAN_MIRROR" >"$rootfs.log" 2>&1; then
    tail -n 20 "$rootfs.log" >&2
    rm -rf "$rootfs"
    fail "debootstrap failed (log: $rootfs.log)" "check access to $DEBIAN_MIRROR"
  fi
  rm -f "$rootfs.log"
  # apt caches and lists are not part of a base image.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  if ! tar -C "$rootfs" -c . | docker import --change 'CMD ["bash"]' - "$LOCAL_BASE" >/dev/null; then
    rm -rf "$rootfs"
    fail "docker import of the debootstrapped base failed" "read the error above"
  fi
  rm -rf "$rootfs"
  done_step "built $LOCAL_BASE"
}

ensure_sandbox_image() {
  step "sandbox image"
  node dist/cli/main.js image build >&2 ||
    fail "the sandbox image build failed" "read the build output above; rerun with 'node dist/cli/main.js image build --force'"
  done_step "ready"
}

# ripgrep on the host: the grep tool uses it in mode off (in a sandbox it comes with the image).
# `npm run check` runs shellcheck (scripts/check-shell.sh) over the bash cordon sends into sandboxes.
ensure_shellcheck() {
  step "shellcheck (npm run check)"
  if command -v shellcheck >/dev/null 2>&1; then
    done_step "present"
    return
  fi
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    apt_install shellcheck || fail "apt-get install shellcheck failed" "check access to Debian's package mirror"
    done_step "installed (Debian shellcheck)"
    return
  fi
  # Not fatal: cordon runs without it; only the check needs it, and says so.
  done_step "missing: install shellcheck (Debian: apt-get install shellcheck) for npm run check"
}

ensure_host_ripgrep() {
  step "ripgrep on the host (grep tool in sandbox mode off)"
  if command -v rg >/dev/null 2>&1; then
    done_step "present"
    return
  fi
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1 && apt_install ripgrep; then
    done_step "installed (Debian ripgrep)"
    return
  fi
  # Not fatal: sandboxed runs do not need it; in mode off grep says to use exec instead.
  done_step "missing: install ripgrep for the grep tool in mode off"
}

main() {
  local only="${1:-all}"
  ensure_node
  ensure_npm_dependencies
  ensure_build
  ensure_executor
  ensure_shellcheck
  [[ "$only" == "node" ]] && return
  ensure_gvisor_installed
  ensure_docker_engine
  ensure_host_ripgrep
  ensure_base_image
  ensure_sandbox_image
  ensure_gvisor_registered
}

main "$@"
