# The default cordon sandbox image. Built by `cordon image build` (and scripts/setup.sh), tagged
# cordon-sandbox:<hash of this file, images/node-runtime.json and the base image id>.
#
# BASE_IMAGE is the official Debian slim image wherever a registry is reachable; where none is,
# scripts/setup.sh builds cordon-base:bookworm with debootstrap and passes that instead.
ARG BASE_IMAGE=debian:bookworm-slim

# Node.js and npm: Debian bookworm's nodejs is 18 (end of life), so the current LTS comes from the
# npm registry as packages pinned in images/node-runtime.json. cordon downloads them on the host
# (through the host's npm, its registry, proxy and CA settings), checks each against its pinned
# sha512 integrity and puts them into the build context as <name>.tgz: the build itself needs no
# registry access and no certificate, and the tarballs stay in this stage.
#
# pnpm and yarn come through corepack, as Node ships them: the node-linux-* package has no lib/, so
# corepack is a pinned package too, and its cache (COREPACK_HOME) is filled here from the pinned
# pnpm and yarn tarballs, laid out as corepack lays out a download (v1/<name>/<version>/ with its
# `.corepack` record, the sha512 being the checked tarball's) and named its last known good
# versions. So `pnpm` and `yarn` run offline with no signature check over the network (which a
# TLS-inspecting proxy breaks: "No compatible signature"); a project whose packageManager names
# another version gets corepack's own download, where a network allows one.
FROM ${BASE_IMAGE} AS node-runtime
COPY node.tgz npm.tgz corepack.tgz pnpm.tgz yarn.tgz /tmp/
RUN set -eu; \
    mkdir -p /opt/node/lib/node_modules/npm /opt/node/lib/node_modules/corepack; \
    tar -xzf /tmp/node.tgz -C /opt/node --strip-components=1 \
        package/bin/node package/include package/share; \
    tar -xzf /tmp/npm.tgz -C /opt/node/lib/node_modules/npm --strip-components=1; \
    tar -xzf /tmp/corepack.tgz -C /opt/node/lib/node_modules/corepack --strip-components=1; \
    ln -s ../lib/node_modules/npm/bin/npm-cli.js /opt/node/bin/npm; \
    ln -s ../lib/node_modules/npm/bin/npx-cli.js /opt/node/bin/npx; \
    for bin in corepack pnpm pnpx yarn yarnpkg; do \
        ln -s "../lib/node_modules/corepack/dist/$bin.js" "/opt/node/bin/$bin"; \
    done; \
    cache=/opt/node/share/corepack; \
    mkdir -p "$cache"; \
    cached() { \
        version=$(tar -xzOf "/tmp/$1.tgz" package/package.json \
            | /opt/node/bin/node -p 'JSON.parse(require("fs").readFileSync(0, "utf8")).version'); \
        hash=$(sha512sum "/tmp/$1.tgz" | cut -d' ' -f1); \
        mkdir -p "$cache/v1/$1/$version"; \
        tar -xzf "/tmp/$1.tgz" -C "$cache/v1/$1/$version" --strip-components=1; \
        printf '{"locator":{"name":"%s","reference":"%s+sha512.%s"},"bin":%s,"hash":"sha512.%s"}\n' \
            "$1" "$version" "$hash" "$2" "$hash" > "$cache/v1/$1/$version/.corepack"; \
        printf '"%s":"%s+sha512.%s"' "$1" "$version" "$hash"; \
    }; \
    { printf '{'; \
      cached pnpm '{"pnpm":"./bin/pnpm.cjs","pnpx":"./bin/pnpx.cjs"}'; printf ','; \
      cached yarn '{"yarn":"./bin/yarn.js","yarnpkg":"./bin/yarn.js"}'; \
      printf '}\n'; } > "$cache/lastKnownGood.json"

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

# corepack reads the cache filled above (read-only at run time: the root is), asks nothing, never
# writes packageManager into a project's package.json (that would be a change in the patch), and
# takes its default versions from the cache's last known good, not the registry.
ENV COREPACK_HOME=/usr/local/share/corepack \
    COREPACK_ENABLE_DOWNLOAD_PROMPT=0 \
    COREPACK_ENABLE_AUTO_PIN=0 \
    COREPACK_DEFAULT_TO_LATEST=0

# A non-root user that owns /workspace. uid 1000 matches the first user of most Linux hosts, so
# files written into a bind-mounted workspace are owned by that user on the host. Git gets an
# identity for any uid, so an agent can commit in its copy (cordon diffs against its own baseline).
RUN set -eu; \
    node --version; npm --version; \
    COREPACK_ENABLE_NETWORK=0 pnpm --version; COREPACK_ENABLE_NETWORK=0 yarn --version; \
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
