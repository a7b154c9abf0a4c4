#!/usr/bin/env bash
# Runs shellcheck over every shell program of the repository: the scripts cordon sends into
# sandboxes (src/**/*.sh), setup, CI and the image helpers. Part of `npm run check`;
# scripts/setup.sh installs shellcheck (Debian's 0.9) where it is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v shellcheck >/dev/null; then
  printf 'check: shellcheck is not installed\n  fix: run scripts/setup.sh (as root on Debian it installs it), or apt-get install shellcheck\n' >&2
  exit 1
fi
# Tracked and new files alike, so a script is checked before its first commit.
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.sh' .ci/run | sort -u)
((${#files[@]} > 0)) || { printf 'check: no shell scripts found\n' >&2; exit 1; }
shellcheck --severity=style -- "${files[@]}"
