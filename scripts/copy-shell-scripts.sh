#!/usr/bin/env bash
# Copies the bash programs cordon sends into sandboxes (src/**/*.sh) into dist/ at the same
# relative paths, beside the compiled modules that send them (src/sandbox/shell/shell-scripts.ts
# reads them from there). Part of `npm run build` and scripts/setup.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT/src"
find . -name '*.sh' -type f -exec cp --parents -- {} "$ROOT/dist/" \;
