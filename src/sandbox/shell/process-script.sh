#!/usr/bin/env bash
# The bash program behind the background-process table of a shell-backed sandbox (sent like the
# exec wrapper: see exec-wrapper.sh). Each process lives in a directory DIR made by the exec
# wrapper's `spawn` mode: `out` (output), `stdin` (a fifo), `pid`, `monitor`, `started`, `command`, and
# `exit` once it ended; `polled` remembers how much output a poll already returned. The sandbox is
# the source of truth, so a new sandbox object for the same container sees the same processes.
#
# `cordon OP ROOT [ID] ARGS...`, where ROOT holds one DIR per process:
# - `list ROOT`: per process, NUL-separated: id, started, status ("running", "lost" or the exit
#   status), command.
# - `read ROOT ID MODE MAX`: MODE poll (from the last poll on, remembered) or log (from the start).
#   Prints six NUL-terminated fields: status, FROM, TO, SKIPPED, started, command; then the bytes:
#   all of FROM..TO when they fit in MAX, else the first and last MAX/2 bytes with SKIPPED bytes
#   between them left out.
# - `write ROOT ID`: stdin goes to the process's stdin.
# - `wait ROOT ID`: prints the status once the process has ended (after `kill` of the wrapper).
unset CORDON_SCRIPT
set -u
fail() { printf 'cordon-file-error:%s:%s\n' "$1" "$2" >&2; exit 3; }

status_of() { # dir; sets status
  local pid
  if [[ -r $1/exit ]]; then
    read -r status <"$1/exit"
    return
  fi
  status=running
  # The monitor writes exit; a process whose monitor is gone (the container restarted) is lost.
  # The monitor's pid, not the process's: between the process's end and the monitor's sweep and
  # exit file, the process is gone but its status is on its way.
  if { read -r pid <"$1/monitor"; } 2>/dev/null && ! kill -0 "$pid" 2>/dev/null && [[ ! -e $1/exit ]]; then
    status=lost
  fi
}

op_list() { # root
  local dir status started command
  for dir in "$1"/*/; do
    dir=${dir%/}
    [[ -d $dir ]] || continue
    status_of "$dir"
    started=$(<"$dir/started") 2>/dev/null || started=
    command=$(<"$dir/command") 2>/dev/null || command=
    printf '%s\0%s\0%s\0%s\0' "${dir##*/}" "$started" "$status" "$command"
  done
  exit 0
}

op_read() { # root id mode max
  local dir=$1/$2 status from=0 size count half skipped=0 started command
  [[ -d $dir ]] || fail not_found "no background process $2"
  status_of "$dir"
  # Size after status: once exited, the output read here is complete.
  # wc, not stat: coreutils stat fails under gVisor (statx with AT_NO_AUTOMOUNT is EINVAL there).
  size=$(wc -c <"$dir/out" 2>/dev/null) || size=0
  if [[ $3 == poll && -r $dir/polled ]]; then read -r from <"$dir/polled"; fi
  ((from > size)) && from=$size
  count=$((size - from))
  if [[ $3 == poll ]]; then printf '%s\n' "$size" >"$dir/polled"; fi
  started=$(<"$dir/started") 2>/dev/null || started=
  command=$(<"$dir/command") 2>/dev/null || command=
  if ((count <= $4)); then
    printf '%s\0' "$status" "$from" "$size" 0 "$started" "$command"
    tail -c +"$((from + 1))" -- "$dir/out" | head -c "$count"
  else
    half=$(($4 / 2))
    skipped=$((count - 2 * half))
    printf '%s\0' "$status" "$from" "$size" "$skipped" "$started" "$command"
    tail -c +"$((from + 1))" -- "$dir/out" | head -c "$half"
    tail -c +"$((size - half + 1))" -- "$dir/out" | head -c "$half"
  fi
  exit 0
}

op_write() { # root id
  local dir=$1/$2 status
  [[ -d $dir ]] || fail not_found "no background process $2"
  status_of "$dir"
  [[ $status == running ]] || fail other "process $2 has exited; it reads no more input"
  # Read-write open never blocks, even if the process is gone by now; a process that stops
  # reading cannot hang the caller for longer than the timeout.
  exec 3<>"$dir/stdin"
  timeout 30 cat >&3
}

op_wait() { # root id
  local dir=$1/$2 status i
  [[ -d $dir ]] || fail not_found "no background process $2"
  for ((i = 0; i < 250; i++)); do
    status_of "$dir"
    [[ $status != running ]] && break
    sleep 0.02
  done
  printf '%s\n' "$status"
}

op=$1
shift
case $op in
  list | read | write | wait) "op_$op" "$@" ;;
  *) fail other "unknown operation $op" ;;
esac
