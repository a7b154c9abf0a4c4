#!/usr/bin/env bash
# Runs inside cordon's inspector container (workspace-inspector.ts), never on the host and never in
# the agent's own container: records a private copy's state as a git tree, or puts the copy back
# to one. /baseline is cordon's baseline git dir (read-only), /checkpoints the checkpoint store
# inside it (read-write: the tree objects this writes), /scratch a private tmpfs. To record, /workspace is mounted read-only; to restore,
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
# usage: cordon record SINCE [INDEX] | restore TARGET [INDEX] | compare | ahead [RECORDER] (sent
#   like the exec wrapper: see exec-wrapper.sh)
#   SINCE, TARGET: tree ids the host took from its own list (validated hex), or for SINCE `-`
#   (compare with the baseline) or `none` (list no changes: a turn's record, whose count of
#   changed files is left to `compare`, when someone lists the checkpoints).
#   INDEX: what to do with the kept index (below): `reuse` (the default) starts from it, `keep`
#   also makes it when there is none (the host says so only when the sandbox stayed idle through
#   this record), `fresh` removes it (and the recorder's cache) and hashes every file.
# stdin: the pathspecs of `git add -A`, NUL-separated (cordon writes them), as for a diff.
# stdout: `git diff --raw -z` from SINCE to the copy as it is (record), or from the copy as it was
#   to TARGET (restore), then the tree id of the copy as it is (before a restore: as it was) and a
#   NUL: last, so a record can write the changes while it writes the tree.
# compare: reads pairs of tree ids (`FROM TO`, each NUL-ended; FROM `-` for the baseline) from
#   stdin instead, and prints for each the number of paths that differ, one line each (`-` when
#   a tree is not in the store). The store is mounted read-only for it.
unset CORDON_SCRIPT
set -euo pipefail

export GIT_DIR=/baseline GIT_WORK_TREE=/workspace
export GIT_INDEX_FILE=/scratch/index GIT_OBJECT_DIRECTORY=/checkpoints/objects
export GIT_ALTERNATE_OBJECT_DIRECTORIES=/baseline/objects
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1
export GIT_TERMINAL_PROMPT=0 LC_ALL=C HOME=/scratch
# A page touched for the first time costs microseconds on the virtual machines cordon runs on, and
# glibc gives back and takes again the ~256 KiB zlib wants for each object git writes: kept.
export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824
git_options=(-c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.untrackedCache=false
  -c safe.directory='*' -c core.compression=1 -c core.looseCompression=1 -c gc.auto=0
  -c core.symlinks=true -c core.fileMode=true)
checkpoint_git() {
  git "${git_options[@]}" "$@"
}
# The recorder's cache (recorder.c), beside the kept index (below).
record_cache=/checkpoints/record-cache
# Made by the first record only: a process per record is a millisecond or more of a turn's wait.
# (A compare mounts the store read-only, and reads only what a record made.)
[ "${1:-}" = compare ] || [ -d /checkpoints/objects ] || mkdir -p /checkpoints/objects

# The recorder writes a pack per record: past this many, a spare joins the store's packs into one
# before it says it is ready, reading nothing of the copy (git looks an object up in each pack).
# The old packs go only once the new one holds every object the store has (git prints its name
# only then); a reader that had one open finds its objects again in the new one.
join_packs_over=16
join_packs() {
  local packs=(/checkpoints/objects/pack/pack-*.pack) joined
  [ "${#packs[@]}" -gt "$join_packs_over" ] || return 0
  joined="$(checkpoint_git cat-file --batch-all-objects --batch-check='%(objectname)' |
    checkpoint_git pack-objects --local --quiet /checkpoints/objects/pack/pack)" || return 0
  [ -f "/checkpoints/objects/pack/pack-$joined.idx" ] || return 0
  for pack in "${packs[@]}"; do
    [ "$pack" = "/checkpoints/objects/pack/pack-$joined.pack" ] || rm -f "$pack" "${pack%.pack}.idx"
  done
}

# `cordon ahead [RECORDER]`: a spare inspector's recorder, started before a turn's record is
# asked of it (workspace-inspector.ts), so the record pays neither this shell's start nor the kept
# index's copy. It copies the kept index (below) now, reading nothing of the copy, then reads MODE
# (record only), SINCE and INDEX, each NUL-ended, from stdin, the pathspecs after them; at
# end-of-file instead (the spare was removed unused) it exits 0. Its stdout starts with a line
# `ready` once it waits for the request: the host counts the spare as started only then, so a
# record sent to it waits for nothing started ahead.
#
# RECORDER (the executor's volume has one): recorder.c, started now too, reads the request
# first and records a turn's state with no process started while the turn waits; what it leaves
# to git (exit 3: another request, a nested repository, an odd name...) is read again from
# /scratch/request, where it put the request, and recorded below as without it.
primed=""
if [ "${1:-}" = ahead ]; then
  join_packs 2>/dev/null || true
  if [ -f /checkpoints/index ]; then
    # Touched first: a kept index made again after the copy is newer than this (copy_kept).
    : >/scratch/primed
    cp /checkpoints/index /scratch/index 2>/dev/null && primed=1
  fi
  # (A volume from a cordon built without it has none: then git alone, as before.)
  if [ -n "${2:-}" ] && [ -x "$2" ]; then
    recorded=0
    (cd /workspace && exec "$2" "$record_cache" git "${git_options[@]}") || recorded=$?
    [ "$recorded" != 0 ] || exit 0
    if [ "$recorded" != 3 ]; then
      echo "checkpoint-copy.sh: the recorder exited $recorded; recording with git" >&2
    fi
    [ ! -f /scratch/request ] || exec </scratch/request
  fi
  # (The recorder says it itself when it got as far as waiting: /scratch/ready.)
  [ -e /scratch/ready ] || printf 'ready\n'
  IFS= read -r -d '' mode || exit 0
  IFS= read -r -d '' other && IFS= read -r -d '' index_use || exit 2
  if [ "$mode" != record ]; then
    echo "checkpoint-copy.sh: only a record is started ahead, not $mode" >&2
    exit 2
  fi
  set -- "$mode" "$other" "$index_use"
fi

usage="usage: cordon record SINCE [INDEX] | restore TARGET [INDEX] | compare"
mode="${1:?$usage}"
other="${2:-}"
[ "$mode" = compare ] || [ -n "$other" ] || { echo "checkpoint-copy.sh: $usage" >&2; exit 2; }
index_use="${3:-reuse}"
case "$index_use" in
keep | reuse | fresh) ;;
*)
  echo "checkpoint-copy.sh: unknown index use $index_use" >&2
  exit 2
  ;;
esac

if [ "$mode" = compare ]; then
  # One line per pair whatever the paths hold: --name-only quotes a name with a newline.
  while IFS=' ' read -r -d '' from to; do
    [ "$from" != - ] || from=refs/cordon/baseline
    if differ="$(checkpoint_git diff-tree -r --no-renames --name-only "$from" "$to" 2>/dev/null)"; then
      if [ -z "$differ" ]; then echo 0; else mapfile -t paths <<<"$differ" && echo "${#paths[@]}"; fi
    else
      echo -
    fi
  done
  exit 0
fi

cd /workspace

is_tree() {
  [ "$(checkpoint_git cat-file -t "$1" 2>/dev/null || true)" = tree ]
}

# The copy as it is now, as one tree: the same `add -A` a diff does, over the baseline's entries.
#
# The kept index (/checkpoints/index, in the store: no sandbox mounts it) holds the baseline's
# entries with the stat data one idle record took, so `add` hashes only files whose stat changed
# since, not the whole copy. Sound because of how it is made (make_kept_index) and one fact: a
# change to a file gives it a ctime of the kernel's clock at the change, which no process can set.
# Git compares ctimes in whole seconds (Debian's git is built without USE_NSEC), so a file
# rewritten with its size and mtime put back looks unchanged when its new ctime falls in the
# second of the kept one (228b237 kept every entry and missed that). The kept index therefore
# holds only entries whose ctime and mtime are at least a second older than the record that
# stat'ed them: any later change has a later ctime second. Taken only when the sandbox stayed idle
# through the record (the host asks its executor before and after, sandbox-quiet.ts): with no
# process alive, none held a file mapped for writing, whose writes can change a file without
# changing its ctime (init and the keep-alive are another uid's, which the agent cannot ptrace).
# Made once, then only read, so no later record has to be idle — unless it is partial: made
# within a second of most of the copy being written (the first record of a freshly seeded copy),
# it holds too few entries with stat data to spare later records much, so the next idle record
# makes it again, from the one it started from (/checkpoints/index-partial says so). A kept index
# newer than now (the clock went back) or that git refuses is removed and the copy hashed whole.
kept=/checkpoints/index
partial=/checkpoints/index-partial
printf -v started '%(%s)T' -1
cutoff=$((started - 1))
mapfile -d '' -t pathspecs
printf '%s\0' "${pathspecs[@]}" >/scratch/pathspecs
: >/scratch/now

add_all() {
  checkpoint_git add -A --pathspec-from-file=/scratch/pathspecs --pathspec-file-nul
}

# The kept index as the scratch index: copied already when started ahead, unless it was made
# again since. (Records of one copy run one after another, and a spare is started only once the
# record before has ended, so the kept index changes under a waiting spare only when another
# process records the same copy: a later mtime says so.)
copy_kept() {
  if [ -n "$primed" ] && ! [[ "$kept" -nt /scratch/primed ]]; then return 0; fi
  cp "$kept" "$GIT_INDEX_FILE"
}

if [ "$mode" = restore ]; then
  # The agent may have made part of its copy unreadable to its own user (chmod 000): git could not
  # read the state being replaced, so the very turn that did it could not be undone. This container
  # runs as that user, who owns the copy (the sandbox frozen), so give the owner back what it
  # lacks: search and write on directories (before find descends: `-exec ... \;`), read on files.
  # No link is followed (find -P; links are skipped), and the copy's own .git is left as it is.
  # What was changed is noted, so it is given git's modes again below.
  find . -xdev -path ./.git -prune -o \
    -type d ! -perm -u=rwx -print0 -exec chmod u+rwx {} \; -o \
    -type f ! -perm -u=r -print0 -exec chmod u+r {} + >/scratch/unreadable
fi
from_kept=""
if [ "$index_use" = fresh ]; then
  rm -f "$kept" "$partial" "$record_cache"
elif [ -f "$kept" ] && ! [[ "$kept" -nt /scratch/now ]] && copy_kept &&
  add_all 2>/dev/null; then
  from_kept=1
elif [ -e "$kept" ]; then
  rm -f "$kept" "$partial"
fi
if [ -z "$from_kept" ]; then
  rm -f "$GIT_INDEX_FILE"
  checkpoint_git read-tree refs/cordon/baseline
  add_all
fi

# After a record of an idle sandbox (from no kept index, or a partial one): its entries, less
# those changed in the last second (their ctime could be matched), reset to the baseline (entries
# that differ from it lose their stat data), renamed into place whole. Partial when more than an
# eighth of the entries were left out for their age.
make_kept_index() {
  # Positional: a path (C-quoted when it holds a newline) and five lines of stat data; anything
  # else fails the pipeline, and nothing is kept.
  checkpoint_git ls-files --debug |
    awk -v cutoff="$cutoff" '
      NR % 6 == 1 { path = $0; next }
      NR % 6 == 2 { if ($1 != "ctime:") exit 1; split($2, t, ":"); ctime = t[1] + 0; next }
      NR % 6 == 3 {
        if ($1 != "mtime:") exit 1
        split($2, t, ":")
        if (ctime >= cutoff || t[1] + 0 >= cutoff) { print path; young += 1 }
        next
      }
      NR % 6 == 0 { if ($1 != "size:") exit 1 }
      END {
        if (NR % 6 != 0) exit 1
        print (young * 8 > NR / 6 ? "partial" : "whole") > "/scratch/kept-kind"
      }' |
    checkpoint_git update-index --force-remove --stdin || return 1
  checkpoint_git read-tree --reset refs/cordon/baseline || return 1
  local next kind
  read -r kind </scratch/kept-kind || return 1
  next="$(mktemp "$kept.XXXXXX")" || return 1
  if ! { cp "$GIT_INDEX_FILE" "$next" && mv -f "$next" "$kept"; }; then
    rm -f "$next"
    return 1
  fi
  if [ "$kind" = partial ]; then
    : >"$partial"
  elif [ -e "$partial" ]; then
    rm -f "$partial"
  fi
}

case "$mode" in
record)
  # The changes since SINCE are read from the index (diff-index --cached) beside write-tree,
  # not from the tree after it: two git processes at once rather than one after the other.
  # SINCE no longer in the store (or `-`): compared with the baseline. A missing object fails
  # diff-index before it writes anything.
  #
  # SINCE `none` (a turn's record): no changes at all. Half the processes of a record, whose
  # count only a listing of the checkpoints shows (`compare`, then, for the turns listed).
  since="$other"
  [ "$since" != - ] || since=refs/cordon/baseline
  if [ "$since" = none ]; then
    checkpoint_git write-tree >/scratch/tree
  else
    {
      checkpoint_git diff-index --cached -r --raw -z --no-abbrev --no-renames "$since" 2>/dev/null ||
        checkpoint_git diff-index --cached -r --raw -z --no-abbrev --no-renames refs/cordon/baseline
    } &
    changes=$!
    checkpoint_git write-tree >/scratch/tree
    wait "$changes"
  fi
  read -r current </scratch/tree
  printf '%s\0' "$current"
  if [ "$index_use" = keep ] && { [ -z "$from_kept" ] || [ -e "$partial" ]; }; then
    # The state is out already: a kept index that cannot be made costs the next record a full hash.
    exec >/dev/null
    make_kept_index 2>/dev/null || true
  fi
  ;;
restore)
  target="$other"
  if ! is_tree "$target"; then
    echo "checkpoint-copy.sh: the checkpoint's tree $target is not in the store" >&2
    exit 3
  fi
  current="$(checkpoint_git write-tree)"
  checkpoint_git diff-tree -r --raw -z --no-abbrev --no-renames "$current" "$target"
  printf '%s\0' "$current"
  # The index holds the copy as it is (stat data fresh from `add`): a one-way merge to the target
  # writes what differs, removes what the target lacks, and leaves ignored files alone.
  checkpoint_git read-tree -u --reset "$target"
  # git writes only a file's executable bit, and skips a file whose content and bit are right: what
  # was unreadable and is still here gets the modes git gives what it writes (0755 directories,
  # 0644 or 0755 files), not the 0700 or 0400 it was left with above.
  while IFS= read -r -d '' path; do
    if [ -L "$path" ]; then continue; fi
    if [ -d "$path" ]; then chmod go+rx "$path"; elif [ -f "$path" ]; then chmod u+w,go+r "$path"; fi
  done </scratch/unreadable
  ;;
*)
  echo "checkpoint-copy.sh: unknown mode $mode" >&2
  exit 2
  ;;
esac
