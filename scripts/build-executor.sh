#!/usr/bin/env bash
# Builds the resident executor (src/sandbox/docker/resident/executor.c) into
# dist/executor/cordon-executor: a static binary, so it runs in any image a user brings (no libc,
# node or python needed there). Skipped when the source is unchanged since the last build. Without
# a C compiler it says so and exits 0: cordon then runs every call by plain Docker exec.
# With --check it builds nothing: exit 0 when the binary is built from the current source, 1 (saying
# why) when it is missing or stale.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SOURCE="$ROOT/src/sandbox/docker/resident/executor.c"
OUT="$ROOT/dist/executor"
CC="${CC:-gcc}"
FLAGS=(-static -O2 -s -Wall -Wextra -Werror)

wanted="$( { sha256sum "$SOURCE" | cut -d' ' -f1; printf '%s\n' "$CC ${FLAGS[*]}"; } | sha256sum | cut -d' ' -f1)"
current=false
if [[ -x "$OUT/cordon-executor" && "$(cat "$OUT/cordon-executor.sha256" 2>/dev/null)" == "$wanted" ]]; then
  current=true
fi
if [[ "${1:-}" == "--check" ]]; then
  if [[ ! -x "$OUT/cordon-executor" ]]; then
    printf 'cordon: the resident executor is not built (%s)\n' "$OUT/cordon-executor" >&2
    exit 1
  fi
  if [[ "$current" != true ]]; then
    printf 'cordon: %s was built from another executor.c (or compiler flags) than the current one: it is stale\n' "$OUT/cordon-executor" >&2
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
# Built beside and renamed into place: a container holding the old binary keeps its own inode. The
# temporary name is this process's, so builds running at once (test files) never share one.
"$CC" "${FLAGS[@]}" -o "$OUT/cordon-executor.tmp.$$" "$SOURCE"
mv -f "$OUT/cordon-executor.tmp.$$" "$OUT/cordon-executor"
printf '%s\n' "$wanted" >"$OUT/cordon-executor.sha256"
