# The egress proxy of sandboxes with an allowlist (sandbox.egress, docs/network.md): Debian's
# squid, nothing else. Built by cordon on first use, tagged cordon-egress-proxy:<hash of this file
# and the base image id>, from the same base as the sandbox image.
#
# cordon passes the whole squid.conf in CORDON_SQUID_CONF (the allowlist and the host's upstream
# proxy are per sandbox); it is written to tmpfs, so the container's root stays read-only.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

RUN set -eux; \
    export DEBIAN_FRONTEND=noninteractive; \
    apt-get update; \
    apt-get install -y --no-install-recommends squid; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/log/apt /var/log/dpkg.log

# Debian's `proxy` user (uid 13); squid never needs root to listen on 3128.
USER proxy
CMD ["sh", "-c", "printf '%s\\n' \"$CORDON_SQUID_CONF\" > /tmp/squid.conf && exec squid -N -f /tmp/squid.conf"]
