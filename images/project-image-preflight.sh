#!/bin/sh
# cordon's preflight of a project image (docs/images.md): run once per built image, in a container
# of that image with no network, as the sandbox user. Prints one `missing: NAME` line for each
# program the sandbox's tools need that the image lacks, and exits 0 either way (a missing shell
# shows as the container failing to start). $1: a user name to look up, or empty. POSIX sh on purpose: bash may be what is missing.

for program in bash git sleep tar cat dd stat mktemp mv rm mkdir chmod readlink ls find xargs grep sed head tail timeout base64; do
  command -v "$program" >/dev/null 2>&1 || echo "missing: $program"
done

# git must run for this uid (an image without a passwd entry for it, or a broken git, fails here).
if command -v git >/dev/null 2>&1 && ! git --version >/dev/null 2>&1; then
  echo "broken: git --version fails"
fi
# The user a devcontainer.json names (remoteUser/containerUser), as uid:gid in this image.
if [ -n "${1:-}" ]; then
  if uid=$(id -u "$1" 2>/dev/null) && gid=$(id -g "$1" 2>/dev/null); then
    echo "user: $uid:$gid"
  else
    echo "user: unknown"
  fi
fi
exit 0
