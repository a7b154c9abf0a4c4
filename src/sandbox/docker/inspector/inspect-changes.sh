#!/usr/bin/env bash
# Runs inside cordon's inspector container (workspace-inspector.ts), never on the host and never in
# the agent's own container: the only program that reads a private copy after an agent wrote to it.
# The copy is mounted read-only at /workspace, cordon's baseline git dir read-only at /baseline, and
# /scratch is a private tmpfs. Whatever git does over the agent's bytes (a submodule's config, a
# filter, a FIFO) happens here, with no network, no capabilities and a read-only root; the host only
# parses what this prints.
#
# usage: cordon patch|changed-files|baseline-directories (sent like the exec wrapper: see
# exec-wrapper.sh)
# stdin: the pathspecs of `git add -A`, NUL-separated (cordon writes them).
unset CORDON_SCRIPT
set -euo pipefail

mode="${1:?usage: cordon patch|changed-files|baseline-directories}"

export GIT_DIR=/baseline GIT_WORK_TREE=/workspace
# What `add` writes (the agent's files as objects) goes to the scratch tmpfs; the baseline's own
# objects are read through the alternates variable and never written.
export GIT_INDEX_FILE=/scratch/index GIT_OBJECT_DIRECTORY=/scratch/objects
export GIT_ALTERNATE_OBJECT_DIRECTORIES=/baseline/objects
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1
export GIT_TERMINAL_PROMPT=0 LC_ALL=C HOME=/scratch
mkdir -p /scratch/objects
cd /workspace

# cordon's config only: no hooks, no fsmonitor; fastest zlib (the objects live for one call).
inspect_git() {
  git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.untrackedCache=false \
    -c safe.directory='*' -c core.compression=1 -c core.looseCompression=1 "$@"
}

if [ "$mode" = baseline-directories ]; then
  # The directories of the seeded copy (those holding a file at seeding), from cordon's baseline
  # alone: the copy itself is not read, so nothing is added.
  cat >/dev/null
  inspect_git ls-tree -r -d -z --name-only refs/cordon/baseline
  exit 0
fi

inspect_git read-tree refs/cordon/baseline
inspect_git add -A --pathspec-from-file=- --pathspec-file-nul

case "$mode" in
patch)
  inspect_git -c diff.noprefix=false -c diff.mnemonicPrefix=false -c core.quotePath=false \
    diff --cached --binary --full-index --no-color --no-ext-diff --no-textconv \
    --src-prefix=a/ --dst-prefix=b/ refs/cordon/baseline
  ;;
changed-files)
  inspect_git diff --cached --raw -z --no-abbrev --no-renames refs/cordon/baseline
  ;;
*)
  echo "inspect-changes.sh: unknown mode $mode" >&2
  exit 2
  ;;
esac
