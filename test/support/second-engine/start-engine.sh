#!/bin/sh
# Starts sshd and dockerd in the test engine's container (not --privileged: the outer engine
# cannot grant every capability here, so it runs with the others and no seccomp/AppArmor).
set -eu

# The cgroup v1 hierarchies of an unprivileged container are read-only; dockerd must create its
# containers' cgroups, so each is mounted again read-write. Its containers go under this
# container's own cgroup, which the outer engine removes with everything below it: nothing is
# left in the host's hierarchy when the container is removed.
own_cgroup=$(awk -F: '$2 == "pids" { print $3 }' /proc/self/cgroup)
for dir in /sys/fs/cgroup/*; do
  mountpoint -q "$dir" || continue
  name=$(basename "$dir")
  umount "$dir"
  if [ "$name" = systemd ]; then
    mount -t cgroup -o none,name=systemd cgroup "$dir"
  else
    mount -t cgroup -o "$name" cgroup "$dir"
  fi
done

/usr/sbin/sshd -e -o PasswordAuthentication=no -o PermitRootLogin=prohibit-password

exec dockerd \
  --host unix:///var/run/docker.sock \
  --host tcp://0.0.0.0:2376 \
  --tlsverify \
  --tlscacert /etc/engine-tls/ca.pem \
  --tlscert /etc/engine-tls/server-cert.pem \
  --tlskey /etc/engine-tls/server-key.pem \
  --cgroup-parent "${own_cgroup}/engine"
