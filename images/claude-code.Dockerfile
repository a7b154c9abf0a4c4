# The Claude Code agent image: cordon's sandbox image with the `claude` CLI added, for
# `agents.*.runtime: "claude-code"` (docs/runtimes.md). Built by `cordon image build --agent
# claude-code` (or on the first claude-code run), tagged cordon-agent-claude-code:<hash of this
# file, images/claude-code.json and the sandbox image>.
#
# @anthropic-ai/claude-code's own npm package is a launcher whose install script picks a native
# binary from per-platform packages. cordon fetches that platform package on the host instead
# (through the host's npm, its registry, proxy and CA settings), checks it against the sha512
# pinned in images/claude-code.json and puts it in the build context as claude.tgz: the build runs
# no install script and needs no registry access or certificate.
ARG SANDBOX_IMAGE=cordon-sandbox:latest

FROM ${SANDBOX_IMAGE} AS unpack
USER root
COPY claude.tgz /tmp/
RUN set -eu; \
    tar -xzf /tmp/claude.tgz -C /tmp package/claude; \
    install -m 0755 /tmp/package/claude /tmp/claude

FROM ${SANDBOX_IMAGE}
COPY --from=unpack /tmp/claude /usr/local/bin/claude
# Preflight: the binary runs on this base (libc, architecture) as the sandbox user.
RUN claude --version
