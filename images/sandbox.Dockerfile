# The default cordon sandbox image. Built by `cordon image build` (and scripts/setup.sh), tagged
# cordon-sandbox:<hash of this file and the base image id>.
#
# BASE_IMAGE is the official Debian slim image wherever a registry is reachable; where none is,
# scripts/setup.sh builds cordon-base:bookworm with debootstrap and passes that instead.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

# The tools a coding agent reaches for. No recommends (nothing that phones home, no daemons),
# apt lists removed so the image carries no stale package index.
RUN set -eux; \
    export DEBIAN_FRONTEND=noninteractive; \
    apt-get update; \
    apt-get install -y --no-install-recommends \
        bash coreutils findutils grep sed gawk diffutils patch procps tar gzip xz-utils \
        git ca-certificates curl jq ripgrep less file \
        python3 nodejs npm; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/log/apt /var/log/dpkg.log

# A non-root user that owns /workspace. uid 1000 matches the first user of most Linux hosts, so
# files written into a bind-mounted workspace are owned by that user on the host.
RUN set -eux; \
    groupadd --gid 1000 sandbox; \
    useradd --uid 1000 --gid 1000 --create-home --home-dir /home/sandbox --shell /bin/bash sandbox; \
    mkdir -p /workspace; \
    chown sandbox:sandbox /workspace; \
    git config --system init.defaultBranch main; \
    git config --system safe.directory '*'

# Tools that would otherwise try the network on their own.
ENV NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false \
    NPM_CONFIG_AUDIT=false \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/home/sandbox \
    LANG=C.UTF-8

USER 1000:1000
WORKDIR /workspace
CMD ["sleep", "infinity"]
