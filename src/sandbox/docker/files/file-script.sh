#!/usr/bin/env bash
# The bash program behind every file operation of a DockerSandbox, run inside the container as
# the container user: `cordon OP ARGS...` (sent like the exec wrapper: see exec-wrapper.sh). Paths
# arrive as arguments (never spliced into shell text) and always absolute, so none can be read as
# an option. The kernel of the container decides everything: read-only mounts, tmpfs,
# permissions, where symlinks lead.
#
# Protocol: exit 0 with the result on stdout; exit 3 with `cordon-file-error:REASON:DETAIL` on
# stderr for a failure the script named; any other status with a coreutils message on stderr,
# mapped by its strerror text (the locale is C).
#
# Metadata comes from find -printf, never coreutils stat: stat asks statx for AT_NO_AUTOMOUNT,
# which gVisor (Debian's runsc) refuses with EINVAL. A write under a read-only mount is refused by
# the script itself, from /proc/self/mounts, because gVisor reports EACCES there, not EROFS.
unset CORDON_SCRIPT
set -u
# Exit 3 with one line naming a reason; any other failure is a coreutils message on stderr that
# the caller maps by its strerror text (the locale is C, so the text is stable).
fail() { printf 'cordon-file-error:%s:%s\n' "$1" "$2" >&2; exit 3; }

# Fails the way the kernel would when nothing is reachable at $1 (missing, a file in the way, no
# search permission): find's message carries the reason.
explain_missing() {
  if [[ -L $1 ]]; then fail not_found "dangling symbolic link"; fi
  find -L "$1" -maxdepth 0 -printf '' || exit 1
  fail not_found "no such file or directory"
}

# One field of find -printf for $2 (following links with -L as $1): %s size, %y type, ...
meta() { find "$1" "$2" -maxdepth 0 -printf "$3"; }

# Fails read_only when the deepest mount holding $1 is mounted read-only. $1 is absolute; it
# need not exist yet. Mount points in /proc/self/mounts escape a space as \040 (printf %b).
refuse_read_only_mount() {
  local path=$1/ point options best="" best_options=""
  # Fields: device, mount point, type, options, dump, pass.
  while read -r _ point _ options _; do
    printf -v point '%b' "$point"
    [[ $point == / ]] || point=$point/
    if [[ $path == "$point"* && ${#point} -ge ${#best} ]]; then
      best=$point
      best_options=,$options,
    fi
  done </proc/self/mounts
  if [[ $best_options == *,ro,* ]]; then fail read_only "read-only file system"; fi
  return 0
}

op_read() { # path max
  [[ -e $1 ]] || explain_missing "$1"
  [[ -d $1 ]] && fail is_directory "is a directory"
  [[ -f $1 ]] || fail other "not a regular file (a device, fifo or socket)"
  [[ -r $1 ]] || fail permission_denied "permission denied"
  local size
  size=$(meta -L "$1" %s) || exit 1
  ((size > $2)) && fail too_large "$size bytes"
  # The size first, so the caller can hold the content in one buffer of the right length; one
  # byte past the limit tells it the file grew past the limit while being read.
  printf '%s\n' "$size"
  # dd with 1 MiB blocks, not head -c (8 KiB writes): every write is a frame of the exec stream,
  # and fewer, larger frames are what makes reading a big file as fast as docker cp.
  exec dd if="$1" bs=1M iflag=count_bytes count="$(($2 + 1))" status=none
}

op_write() { # path mode create-parents size; the content arrives on stdin
  local target=$1 dir tmp err
  # Writing through a symbolic link writes its target, as an editor would.
  if [[ -L $target ]]; then target=$(readlink -m -- "$target") || exit 1; fi
  refuse_read_only_mount "$target"
  dir=${target%/*}
  dir=${dir:-/}
  if [[ ! -d $dir ]]; then
    if [[ -e $dir ]]; then fail not_directory "$dir is not a directory"; fi
    if [[ $3 != 1 ]]; then explain_missing "$dir"; fi
    mkdir -p -- "$dir" || exit 1
  fi
  [[ -d $target ]] && fail is_directory "is a directory"
  tmp=$(mktemp -- "$dir/.cordon-write.XXXXXXXX") || exit 1
  trap 'rm -f -- "$tmp"' EXIT
  cat >"$tmp" || exit 1
  # Fewer bytes than announced: the upload was cut off (an abort); keep the old content.
  [[ $(meta -P "$tmp" %s) == "$4" ]] || fail other "the upload was cut off"
  if [[ -e $target ]]; then
    chmod --reference="$target" -- "$tmp" 2>/dev/null || true
  else
    chmod -- "$2" "$tmp" || exit 1
  fi
  if ! err=$(mv -fT -- "$tmp" "$target" 2>&1); then
    # A file that is itself a mount point cannot be replaced; write it in place instead (a
    # read-only one then fails with the kernel's read-only error).
    if [[ $err == *"Device or resource busy"* ]]; then
      cat -- "$tmp" >"$target" || exit 1
      exit 0
    fi
    printf '%s\n' "$err" >&2
    exit 1
  fi
  trap - EXIT
}

op_stat() { # path; prints KIND|SIZE|MODE|MTIME, KIND in stat's words (the protocol predates find)
  local err kind
  if [[ -e $1 ]]; then
    case $(meta -L "$1" %y) in
      f) kind="regular file" ;;
      d) kind=directory ;;
      *) kind=other ;;
    esac
    printf '%s|' "$kind"
    exec find -L "$1" -maxdepth 0 -printf '%s|%m|%T@\n'
  fi
  if [[ -L $1 ]]; then exec find -P "$1" -maxdepth 0 -printf 'dangling|%s|%m|%T@\n'; fi
  err=$(find -L "$1" -maxdepth 0 -printf '' 2>&1 >/dev/null)
  case $err in
    "" | *"No such file or directory"* | *"Not a directory"*) printf 'none\n' ;;
    *) printf '%s\n' "$err" >&2 && exit 1 ;;
  esac
}

op_list() { # path depth limit
  [[ -e $1 ]] || explain_missing "$1"
  [[ -d $1 ]] || fail not_directory "not a directory"
  [[ -r $1 && -x $1 ]] || fail permission_denied "permission denied"
  # Entries that cannot be read further down are skipped, like ls -R does; one more than the
  # limit tells the caller the listing was cut.
  find -H "$1" -mindepth 1 -maxdepth "$2" -printf '%P\t%y\t%s\0' 2>/dev/null |
    sort -z | head -z -n "$(($3 + 1))"
  exit 0
}

op_mkdir() { # path
  refuse_read_only_mount "$1"
  if [[ -e $1 && ! -d $1 ]]; then fail not_directory "exists and is not a directory"; fi
  exec mkdir -p -- "$1"
}

op_remove() { # path recursive
  [[ -e $1 || -L $1 ]] || explain_missing "$1"
  refuse_read_only_mount "$1"
  if [[ -d $1 && ! -L $1 ]]; then
    if [[ $2 == 1 ]]; then exec rm -rf -- "$1"; fi
    exec rmdir -- "$1"
  fi
  exec rm -f -- "$1"
}

op_rename() { # from to
  [[ -e $1 || -L $1 ]] || explain_missing "$1"
  refuse_read_only_mount "$1"
  refuse_read_only_mount "$2"
  exec mv -fT -- "$1" "$2"
}

op=$1
shift
case $op in
  read | write | stat | list | mkdir | remove | rename) "op_$op" "$@" ;;
  *) fail other "unknown operation $op" ;;
esac
