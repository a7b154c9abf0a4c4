#!/usr/bin/env bash
# Runs inside cordon's inspector container (workspace-inspector.ts), never on the host and never in
# the agent's own container: records a private copy's state as a git tree, or puts the copy back
# to one. /baseline is cordon's baseline git dir (read-only), /checkpoints the checkpoint store
# inside it (read-write: the tree objects this writes, and the last record's index, kept as a
# cache), /scratch a private tmpfs. To record, /workspace is mounted read-only; to restore,
# read-write, and the sandbox is frozen meanwhile.
#
# Why a hostile copy cannot turn this against anything: the container has no network, no
# capabilities, a read-only root and sees no host path but these three mounts, so a link in the
# copy (`evil -> /etc`) resolves inside this container; git never writes through a link (it
# removes a link that stands where a directory must be, and replaces a file rather than opening
# it); the baseline's info/attributes turn every filter off, hooks and fsmonitor are off here.
# What the store holds is no more than the agent could write into the copy itself, and the host
# reads none of it: it keeps its own list of checkpoints and takes only hex tree ids from stdout.
#
# usage: cordon record SINCE | restore TARGET (sent like the exec wrapper: see exec-wrapper.sh)
#   SINCE, TARGET: tree ids the host took from its own list (validated hex), or `-` for SINCE
#   (compare with the baseline).
# stdin: the pathspecs of `git add -A`, NUL-separated (cordon writes them), as for a diff.
# stdout: the tree id of the copy as it is (before a restore: as it was), a NUL, then
#   `git diff-tree --raw -z` from SINCE to it (record) or from it to TARGET (restore).
unset CORDON_SCRIPT
set -euo pipefail

mode="${1:?usage: cordon record SINCE | restore TARGET}"
other="${2:?usage: cordon record SINCE | restore TARGET}"

export GIT_DIR=/baseline GIT_WORK_TREE=/workspace
export GIT_INDEX_FILE=/scratch/index GIT_OBJECT_DIRECTORY=/checkpoints/objects
export GIT_ALTERNATE_OBJECT_DIRECTORIES=/baseline/objects
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1
export GIT_TERMINAL_PROMPT=0 LC_ALL=C HOME=/scratch
mkdir -p /checkpoints/objects
cd /workspace

checkpoint_git() {
  git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.untrackedCache=false \
    -c safe.directory='*' -c core.compression=1 -c core.looseCompression=1 -c gc.auto=0 \
    -c core.symlinks=true -c core.fileMode=true "$@"
}

is_tree() {
  [ "$(checkpoint_git cat-file -t "$1" 2>/dev/null || true)" = tree ]
}

# The copy as it is now, as one tree: the same `add -A` a diff does, over the baseline's index.
# A record starts from the index the last record left in the store (only a cache of stat data:
# a one-way `read-tree --reset` sets every entry to the baseline and keeps the stat data of those
# that match it), so `add` hashes only files whose stat changed, not the whole copy each turn. A
# cached index that is missing or that git refuses costs the full hash, nothing else. `cp -p`
# keeps its time, which git's racy-entry check compares with its entries'. A record works on an
# index of its own in the store and renames it over the cache at the end, so a record running
# beside it (another inspector) reads a whole index or none. Few processes: each costs a turn.
cached=/checkpoints/index
if [ "$mode" = record ]; then
  export GIT_INDEX_FILE="$cached.$$.$RANDOM$RANDOM"
  trap '[ ! -e "$GIT_INDEX_FILE" ] || rm -f "$GIT_INDEX_FILE"' EXIT
fi
if [ "$mode" = record ] && cp -p "$cached" "$GIT_INDEX_FILE" 2>/dev/null &&
  checkpoint_git read-tree --reset refs/cordon/baseline 2>/dev/null; then
  :
else
  rm -f "$GIT_INDEX_FILE"
  checkpoint_git read-tree refs/cordon/baseline
fi
checkpoint_git add -A --pathspec-from-file=- --pathspec-file-nul
current="$(checkpoint_git write-tree)"

case "$mode" in
record)
  # A cache that cannot be kept (a full store) fails nothing.
  mv -f "$GIT_INDEX_FILE" "$cached" 2>/dev/null || true
  printf '%s\0' "$current"
  # SINCE no longer in the store (or `-`): compared with the baseline. A missing object fails
  # diff-tree before it writes anything.
  since="$other"
  if [ "$since" = - ] ||
    ! checkpoint_git diff-tree -r --raw -z --no-abbrev --no-renames "$since" "$current" 2>/dev/null; then
    checkpoint_git diff-tree -r --raw -z --no-abbrev --no-renames refs/cordon/baseline "$current"
  fi
  ;;
restore)
  target="$other"
  if ! is_tree "$target"; then
    echo "checkpoint-copy.sh: the checkpoint's tree $target is not in the store" >&2
    exit 3
  fi
  printf '%s\0' "$current"
  checkpoint_git diff-tree -r --raw -z --no-abbrev --no-renames "$current" "$target"
  # The index holds the copy as it is (stat data fresh from `add`): a one-way merge to the target
  # writes what differs, removes what the target lacks, and leaves ignored files alone.
  checkpoint_git read-tree -u --reset "$target"
  ;;
*)
  echo "checkpoint-copy.sh: unknown mode $mode" >&2
  exit 2
  ;;
esac
