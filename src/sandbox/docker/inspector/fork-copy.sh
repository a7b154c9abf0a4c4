#!/usr/bin/env bash
# Runs inside cordon's inspector container (workspace-inspector.ts), never on the host and never in
# an agent's own container: copies a private copy, /workspace (read-only; its sandbox is frozen
# meanwhile), into /fork, the private copy of a new sandbox forked from it (read-write, mounted
# into no other container yet, or into a warm pool member no agent has used). Every file goes:
# ignored ones, the copy's own .git, carried trees, modes, links as links, hard links as hard links.
#
# Why a hostile copy cannot turn this against anything: the container has no network, no
# capabilities, a read-only root and sees no host path but these mounts; it runs as the sandbox
# user, so it can read and write nothing the agent could not. A link in the copy (`evil -> /etc`)
# is copied as a link, never followed (cp -a, no -L), and would resolve inside this container if
# it were. What lands in /fork is no more than the agent could have written into a copy itself.
# The host reads nothing of it.
#
# usage: cordon fork (sent like the exec wrapper: see exec-wrapper.sh)
# stdout: nothing; stderr: what failed (a file the sandbox user cannot read, a full disk).
unset CORDON_SCRIPT
set -euo pipefail

export LC_ALL=C HOME=/scratch
cd /fork

# A warm pool member's copy holds a seed of the repository: the fork replaces it whole.
find /fork -mindepth 1 -maxdepth 1 -exec rm -rf -- {} +
cp -a /workspace/. /fork/
