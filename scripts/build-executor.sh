#!/usr/bin/env bash
# Builds cordon's two C programs into dist/executor/, static binaries, so they run in any image a
# user brings (no libc, node or python needed there):
# - cordon-executor, the resident executor (src/sandbox/docker/resident/executor.c);
# - cordon-recorder, a turn's checkpoint recorder (src/sandbox/docker/inspector/recorder.c), which
#   travels in the executor's support volume to the recording inspectors.
# Skipped when the sources are unchanged since the last build. Without a C compiler it says so and
# exits 0: cordon then runs every call by plain Docker exec and records checkpoints with git alone.
# With --check it builds nothing: exit 0 when both binaries are built from the current sources, 1
# (saying why) when one is missing or stale.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/dist/executor"
CC="${CC:-gcc}"
FLAGS=(-static -O2 -s -Wall -Wextra -Werror)
# binary name, then its source
PROGRAMS=(
  cordon-executor "$ROOT/src/sandbox/docker/resident/executor.c"
  cordon-recorder "$ROOT/src/sandbox/docker/inspector/recorder.c"
)

sources=()
for ((i = 1; i < ${#PROGRAMS[@]}; i += 2)); do sources+=("${PROGRAMS[i]}"); done
wanted="$( { sha256sum "${sources[@]}" | cut -d' ' -f1; printf '%s\n' "$CC ${FLAGS[*]}"; } | sha256sum | cut -d' ' -f1)"
built() {
  local binary
  for ((i = 0; i < ${#PROGRAMS[@]}; i += 2)); do
    binary="$OUT/${PROGRAMS[i]}"
    if [[ ! -x "$binary" ]]; then
      missing="$binary"
      return 1
    fi
  done
}
missing=""
current=false
if built && [[ "$(cat "$OUT/cordon-executor.sha256" 2>/dev/null)" == "$wanted" ]]; then
  current=true
fi
if [[ "${1:-}" == "--check" ]]; then
  if [[ -n "$missing" ]]; then
    printf 'cordon: the resident executor is not built (%s)\n' "$missing" >&2
    exit 1
  fi
  if [[ "$current" != true ]]; then
    printf 'cordon: %s was built from another executor.c or recorder.c (or compiler flags) than the current ones: it is stale\n' "$OUT" >&2
    exit 1
  fi
  exit 0
fi
if [[ "$current" == true ]]; then
  exit 0
fi
if ! command -v "$CC" >/dev/null; then
  printf 'cordon: no C compiler (%s): the resident executor is not built; commands run by plain exec (install gcc and libc6-dev, then npm run build)\n' "$CC" >&2
  exit 0
fi
mkdir -p "$OUT"
# Each built beside and renamed into place: a container holding the old binary keeps its own inode.
# The temporary name is this process's, so builds running at once (test files) never share one.
for ((i = 0; i < ${#PROGRAMS[@]}; i += 2)); do
  "$CC" "${FLAGS[@]}" -o "$OUT/${PROGRAMS[i]}.tmp.$$" "${PROGRAMS[i + 1]}"
  mv -f "$OUT/${PROGRAMS[i]}.tmp.$$" "$OUT/${PROGRAMS[i]}"
done
printf '%s\n' "$wanted" >"$OUT/cordon-executor.sha256"
