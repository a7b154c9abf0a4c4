#!/usr/bin/env bash
# The demo: a real agent loop in a real sandbox fixes a failing test in a small repository.
#   1. sets up whatever is missing (scripts/setup.sh: deps, build, Docker engine, sandbox image);
#   2. copies examples/demo-repo into a fresh git repository under a temporary directory;
#   3. runs `cordon run` on it with the default policy — sandboxed, no network, the workspace not
#      mounted but seeded as a private copy — using the Anthropic API when ANTHROPIC_API_KEY is set,
#      else the scripted model of examples/demo/script.json;
#   4. shows the change the agent made (`cordon diff`: taken on the host with the sandbox paused,
#      against a baseline cordon keeps outside the sandbox) and proves the
#      real repository was not touched.
# Everything it makes lives under one temporary directory (kept, and named at the end) plus one
# sandbox (container and private copy), removed at the end unless CORDON_DEMO_KEEP=1.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh

work="$(mktemp -d "${TMPDIR:-/tmp}/cordon-demo.XXXXXX")"
repo="$work/repo"
export CORDON_HOME="$work/home"
cp -R examples/demo-repo "$repo"
git -C "$repo" init -q
git -C "$repo" add -A
git -C "$repo" -c user.name=demo -c user.email=demo@example.invalid commit -qm "demo repository"

cordon() { node "$ROOT/dist/cli/main.js" "$@"; }
session="demo"
common=(--workspace "$repo" --session "$session")

run_args=(run "${common[@]}" --max-turns 20 --timeout 10m)
if [[ -n "${ANTHROPIC_API_KEY:-}" ]]; then
  printf '\n==> running the agent with the Anthropic API (%s)\n' "${CORDON_MODEL:-default model}" >&2
  [[ -n "${CORDON_MODEL:-}" ]] && run_args+=(--model "$CORDON_MODEL")
else
  printf '\n==> running the agent with the scripted model (no ANTHROPIC_API_KEY set)\n' >&2
  run_args+=(--model-script "$ROOT/examples/demo/script.json")
fi

status=0
cordon "${run_args[@]}" \
  "The test suite of this repository fails. Find the bug and fix the code, not the tests. Run the tests to confirm." ||
  status=$?

printf '\n==> the change the agent made to its private copy (cordon diff)\n' >&2
cordon diff "${common[@]}" || true

printf '\n==> the real repository is untouched (git status --short):\n' >&2
git -C "$repo" status --short >&2
printf '    (empty above = no change)\n' >&2

if [[ "${CORDON_DEMO_KEEP:-0}" == "1" ]]; then
  printf '    apply the change with: CORDON_HOME=%s cordon apply --workspace %s --session %s\n' \
    "$CORDON_HOME" "$repo" "$session" >&2
  printf '    remove the sandbox with: CORDON_HOME=%s cordon sandbox rm --all --discard-changes\n' "$CORDON_HOME" >&2
else
  # --all stays inside this CORDON_HOME: only the demo's own sandbox goes. Its private copy is a
  # mounted disk image (sandbox.disk), which `sandbox rm` unmounts before deleting. The agent's fix
  # was shown, never applied: discarding it is the point of the demo's cleanup, so say so.
  cordon sandbox rm --all --discard-changes >/dev/null ||
    printf '    (the sandbox could not be removed: see the line above)\n' >&2
  # shellcheck disable=SC2016 # the backquotes mark a command in the message; nothing expands
  printf '    (the sandbox is removed; CORDON_DEMO_KEEP=1 keeps it, to try `cordon apply`)\n' >&2
fi
printf '\n==> demo finished with exit code %d; files kept in %s\n' "$status" "$work" >&2
exit "$status"
