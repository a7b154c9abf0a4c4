# The default cordon sandbox image. Built by `cordon image build` (and scripts/setup.sh), tagged
# cordon-sandbox:<hash of this file, images/node-runtime.json and the base image id>.
#
# BASE_IMAGE is the official Debian slim image wherever a registry is reachable; where none is,
# scripts/setup.sh builds cordon-base:bookworm with debootstrap and passes that instead.
ARG BASE_IMAGE=debian:bookworm-slim

# Node.js and npm: Debian bookworm's nodejs is 18 (end of life), so the current LTS comes from the
# npm registry as packages pinned in images/node-runtime.json. cordon downloads them on the host
# (through the host's npm, its registry, proxy and CA settings), checks each against its pinned
# sha512 integrity and puts them into the build context as node.tgz and npm.tgz: the build itself
# needs no registry access and no certificate, and the tarballs stay in this stage.
FROM ${BASE_IMAGE} AS node-runtime
COPY node.tgz npm.tgz /tmp/
RUN set -eu; \
    mkdir -p /opt/node/lib/node_modules/npm; \
    tar -xzf /tmp/node.tgz -C /opt/node --strip-components=1 \
        package/bin/node package/include package/share; \
    tar -xzf /tmp/npm.tgz -C /opt/node/lib/node_modules/npm --strip-components=1; \
    ln -s ../lib/node_modules/npm/bin/npm-cli.js /opt/node/bin/npm; \
    ln -s ../lib/node_modules/npm/bin/npx-cli.js /opt/node/bin/npx

FROM ${BASE_IMAGE}

# The tools a coding agent reaches for, and what real projects' test suites need: Python with pip,
# venv and pytest (`python` is python3), make and a C/C++ toolchain. No recommends (nothing that
# phones home, no daemons), apt lists removed so the image carries no stale package index.
RUN set -eu; \
    export DEBIAN_FRONTEND=noninteractive; \
    apt-get update -q; \
    apt-get install -y -q --no-install-recommends \
        bash coreutils findutils grep sed gawk diffutils patch procps tar gzip xz-utils \
        git ca-certificates curl jq ripgrep less file \
        python3 python3-pip python3-venv python3-pytest python-is-python3 \
        make build-essential; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/log/apt /var/log/dpkg.log

COPY --from=node-runtime /opt/node/ /usr/local/

# A non-root user that owns /workspace. uid 1000 matches the first user of most Linux hosts, so
# files written into a bind-mounted workspace are owned by that user on the host. Git gets an
# identity for any uid, so an agent can commit in its copy (cordon diffs against its own baseline).
RUN set -eu; \
    node --version; npm --version; \
    groupadd --gid 1000 sandbox; \
    useradd --uid 1000 --gid 1000 --create-home --home-dir /home/sandbox --shell /bin/bash sandbox; \
    mkdir -p /workspace; \
    chown sandbox:sandbox /workspace; \
    git config --system init.defaultBranch main; \
    git config --system safe.directory '*'; \
    git config --system user.name 'cordon sandbox'; \
    git config --system user.email 'sandbox@cordon.invalid'

# Tools that would otherwise try the network on their own. node-gyp builds native addons against
# the headers shipped above (a carried node_modules built for another Node needs `npm rebuild`)
# instead of downloading them.
ENV NPM_CONFIG_UPDATE_NOTIFIER=false \
    npm_config_nodedir=/usr/local \
    NPM_CONFIG_FUND=false \
    NPM_CONFIG_AUDIT=false \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/home/sandbox \
    LANG=C.UTF-8

USER 1000:1000
WORKDIR /workspace
CMD ["sleep", "infinity"]
