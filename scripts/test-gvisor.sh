#!/usr/bin/env bash
# The second test pass: the hardened-container, tool and Sandbox contract integration tests with
# every sandbox under gVisor (CORDON_TEST_RUNTIME=runsc; docs/gvisor.md): exec, the file tools, read-only mounts, the
# pids limit, no network, no route to the host (forwarded ports over the executor), and the checkpoint recorder
# against git (an inspector runs under its sandbox's runtime). tools-files is left out: its own checks run coreutils stat and ls -l in
# the sandbox, which fail under gVisor (statx), though the tools themselves pass. Needs runsc registered with the engine, which
# `CORDON_RUNTIME=runsc bash scripts/setup.sh` does. Extra arguments go to vitest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ " $(docker info --format '{{range $name, $_ := .Runtimes}}{{$name}} {{end}}' 2>/dev/null) " != *" runsc "* ]]; then
  printf 'runsc is not registered with the Docker engine\n  fix: CORDON_RUNTIME=runsc bash scripts/setup.sh\n' >&2
  exit 1
fi
CORDON_TEST_RUNTIME=runsc exec node_modules/.bin/vitest run --project integration \
  test/integration/hardened-container.integration.test.ts \
  test/integration/docker-sandbox-tools.integration.test.ts \
  test/contract/docker-sandbox.contract.integration.test.ts \
  test/integration/no-route-to-host.integration.test.ts \
  test/integration/checkpoint-recorder.integration.test.ts \
  "$@"
