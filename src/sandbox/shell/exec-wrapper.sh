#!/usr/bin/env bash
# The bash program every command of a shell-backed sandbox runs under (inside a container, or on
# the host in mode off). cordon sends it with each call (src/sandbox/shell/command-line.ts,
# scriptInvocation: it travels in CORDON_SCRIPT and runs as `bash -c 'eval "$CORDON_SCRIPT"'`), so
# nothing has to be installed in the sandbox image, and every path or command is an argument
# (`cordon MODE ARGS...`), never spliced into shell text.
#
# Modes:
# - `run ID CWD ROOT COMMAND`: enter CWD (resolved physically; refused when it is missing, not a
#   directory, outside ROOT, or under /proc, /sys or /dev), then run COMMAND with `bash -lc` in a
#   session of its own, marked with `CORDON_RUN=ID` in its environment. When it exits, every
#   process it left behind is killed, so a command never outlives its call. A refusal is exit 125
#   with one stderr line `cordon-exec[ID]: REASON PATH`.
# - `spawn ID CWD ROOT COMMAND DIR LOG_MAX STARTED_AT LABEL`: the same checks, then start COMMAND
#   in the background with stdin from the fifo DIR/stdin and output to DIR/out (at most LOG_MAX
#   bytes kept); DIR/exit gets the exit status, DIR/started and DIR/command the start time and the
#   label (the command as the caller gave it), DIR/pid and DIR/monitor the pids of the command and
#   of the subshell that waits for it. The base of background processes.
# - `kill ID`: kill the whole process tree of run ID.
#
# The tree is found four ways, because each alone can be escaped: the environment marker
# (inherited by every descendant that does not clear its environment), the session and process
# group of marked processes (kept across `env -i`), parenthood (a child of a killed process,
# whatever it did to its session or environment), and the run's output pipe (a daemon that did
# all of that and was orphaned, but still writes to the call's output). Found processes are
# stopped before they are killed, so a fork loop cannot outrun the sweep, and the sweep repeats
# until a pass finds nothing. What escapes all four (a double-forked daemon that cleared its
# environment and closed its output) needs cgroups to catch; a container's own limits bound it.
unset CORDON_SCRIPT
set -u
cordon_fail() { # reason, path
  printf 'cordon-exec[%s]: %s %s\n' "$cordon_id" "$1" "$2" >&2
  exit 125
}

cordon_enter() { # cwd, root
  local cwd=$1 root=$2
  # Checked as given too: /proc/self/cwd and friends resolve to innocent-looking places.
  case $cwd in
    /proc | /proc/* | /sys | /sys/* | /dev | /dev/*) cordon_fail outside_sandbox "$cwd" ;;
  esac
  [[ -e $cwd ]] || cordon_fail not_found "$cwd"
  [[ -d $cwd ]] || cordon_fail not_directory "$cwd"
  cd -P -- "$cwd" 2>/dev/null || cordon_fail permission_denied "$cwd"
  # A link through /proc/self/root resolves to "//etc": collapse repeated slashes.
  shopt -s extglob
  PWD=${PWD//+(\/)/\/}
  shopt -u extglob
  case $PWD in
    /proc | /proc/* | /sys | /sys/* | /dev | /dev/*) cordon_fail outside_sandbox "$cwd" ;;
  esac
  if [[ $root != / && $PWD != "$root" && $PWD != "$root"/* ]]; then
    cordon_fail outside_sandbox "$cwd"
  fi
}

cordon_sweep() { # id [pid of the run's wrapper, whose stdout and stderr the tree shares]
  local marker="CORDON_RUN=$1" ref=${2:-} round dir pid line entry found unsure rescans=0
  local -a fields environ arguments
  local -A hit=() groups=() spare=()
  local out='' err=''
  # Only a pipe or socket identifies the run's output; /dev/null or a file is shared by anyone.
  if [[ -n $ref ]]; then
    [[ -p /proc/$ref/fd/1 || -S /proc/$ref/fd/1 ]] && out=/proc/$ref/fd/1
    [[ -p /proc/$ref/fd/2 || -S /proc/$ref/fd/2 ]] && err=/proc/$ref/fd/2
  fi
  # The wrapper and whatever started it share its output too; they are never part of the tree.
  pid=$ref
  while [[ -n $pid && $pid != 0 ]] && { read -r line <"/proc/$pid/stat"; } 2>/dev/null; do
    spare[$pid]=1
    # Split on purpose: after "(comm) " come numbers and one state letter, nothing to glob; and
    # `read -a <<<` would cost a temporary file per process of this hot loop.
    # shellcheck disable=SC2206
    fields=(${line##*) })
    pid=${fields[1]}
  done
  # A process in the middle of an exec shows neither arguments nor environment for a moment, so
  # a pass that found nothing but met one looks again (each pass takes a few milliseconds), for a
  # bounded while: `bash -c 'echo go; sleep 9'` becomes `sleep` in place, and a kill sent as "go"
  # arrived used to miss it.
  for ((round = 0; round < 100; )); do
    found=()
    unsure=
    for dir in /proc/[0-9]*; do
      pid=${dir#/proc/}
      ((pid == $$ || pid == BASHPID)) && continue
      [[ -n ${spare[$pid]+x} ]] && continue
      { read -r line <"$dir/stat"; } 2>/dev/null || continue
      # After the command name (which may hold spaces and parentheses) come single words only.
      # shellcheck disable=SC2206
      fields=(${line##*) })
      # state ppid pgrp session
      [[ ${fields[0]} == [ZX] ]] && continue
      if [[ -n ${hit[${fields[1]}]+x} || -n ${groups[${fields[2]}]+x} || -n ${groups[${fields[3]}]+x} ]]; then
        found+=("$pid")
        continue
      fi
      # Still writing to the run's output: a daemon that cleared its environment, left the
      # session and was orphaned is caught here, as long as it kept the output open.
      if [[ (-n $out && $dir/fd/1 -ef $out) || (-n $err && $dir/fd/2 -ef $err) ]]; then
        found+=("$pid")
        continue
      fi
      environ=()
      { mapfile -d '' environ <"$dir/environ"; } 2>/dev/null || continue
      if ((${#environ[@]} == 0)); then
        # `env -i` leaves an environment empty for good, but never the arguments.
        arguments=()
        { mapfile -d '' arguments <"$dir/cmdline"; } 2>/dev/null
        ((${#arguments[@]} == 0)) && unsure=1
        continue
      fi
      for entry in "${environ[@]}"; do
        if [[ $entry == "$marker" ]]; then
          found+=("$pid")
          groups[${fields[2]}]=1
          groups[${fields[3]}]=1
          break
        fi
      done
    done
    if ((${#found[@]} == 0)); then
      [[ -n $unsure ]] && ((rescans++ < 50)) && continue
      return 0
    fi
    ((++round))
    kill -STOP "${found[@]}" 2>/dev/null
    kill -KILL "${found[@]}" 2>/dev/null
    for pid in "${found[@]}"; do hit[$pid]=1; done
  done
}

cordon_find_wrapper() { # id; sets cordon_wrapper: the parent of the run's session leader, if alive
  local marker="CORDON_RUN=$1" dir pid line entry parent_entry
  local -a fields environ
  cordon_wrapper=
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    { read -r line <"$dir/stat"; } 2>/dev/null || continue
    # shellcheck disable=SC2206
    fields=(${line##*) })
    # The leader is the marked process that leads its own session (setsid made it so).
    [[ ${fields[3]} == "$pid" ]] || continue
    environ=()
    { mapfile -d '' environ <"$dir/environ"; } 2>/dev/null || continue
    for entry in "${environ[@]}"; do
      [[ $entry == "$marker" ]] || continue
      # A setsid'd descendant leads a session too; the run's leader has an unmarked parent.
      environ=()
      { mapfile -d '' environ <"/proc/${fields[1]}/environ"; } 2>/dev/null
      for parent_entry in "${environ[@]}"; do
        [[ $parent_entry == "$marker" ]] && continue 3
      done
      # An orphaned leader (its wrapper, or the resident executor that ran it, was killed) has
      # init for a parent, whose output is the container's log, shared with its main process:
      # not the run's output.
      ((fields[1] > 1)) && cordon_wrapper=${fields[1]}
      return
    done
  done
}

cordon_oom_kills() { # sets cordon_oom to the cgroup's OOM kill count (empty when unknown)
  local file key value
  cordon_oom=
  for file in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
    [[ -r $file ]] || continue
    while read -r key value; do
      [[ $key == oom_kill ]] && cordon_oom=$value && return
    done <"$file" 2>/dev/null
  done
}

cordon_mode=$1
cordon_id=$2
# Pid files and OOM marks; a private directory on a host, /tmp/.cordon in a container.
cordon_state=${CORDON_STATE:-/tmp/.cordon}
unset CORDON_STATE
case $cordon_mode in
  run)
    cordon_enter "$3" "$4"
    cordon_oom_kills
    cordon_before=$cordon_oom
    CORDON_RUN=$cordon_id setsid bash -lc "$5" <&0 &
    cordon_pid=$!
    # Quietly: bash reports a killed job ("line 99: 120 Killed  CORDON_RUN=... setsid ...") on
    # stderr, which would put this wrapper's text into the command's output.
    wait "$cordon_pid" 2>/dev/null
    cordon_status=$?
    cordon_sweep "$cordon_id" "$$"
    if ((cordon_status == 137)) && [[ -n $cordon_before ]]; then
      cordon_oom_kills
      if [[ -n $cordon_oom && $cordon_oom != "$cordon_before" ]]; then
        mkdir -p -- "$cordon_state/oom" 2>/dev/null && : >"$cordon_state/oom/$cordon_id" 2>/dev/null
      fi
    fi
    exit "$cordon_status"
    ;;
  spawn)
    cordon_enter "$3" "$4"
    cordon_dir=$6
    mkdir -p -- "$cordon_dir" && mkfifo -- "$cordon_dir/stdin" "$cordon_dir/output" || exit 1
    printf '%s' "$8" >"$cordon_dir/started"
    printf '%s' "$9" >"$cordon_dir/command"
    (
      printf '%s\n' "$BASHPID" >"$cordon_dir/monitor"
      # Output goes through the fifo DIR/output to a reader that keeps LOG_MAX bytes and reads
      # and drops the rest, so a chatty process is never stopped by a full pipe. dd, not head:
      # head buffers its output in stdio, and a poll must see every line as soon as it is
      # printed. A fifo, not a process substitution: under gVisor (release 2022-12) `setsid`
      # with its output into `>(...)`, started as the exec's own shell exits, left every later
      # exec of the container hanging.
      { dd bs=65536 count="$7" iflag=count_bytes status=none >"$cordon_dir/out"; exec cat >/dev/null; } <"$cordon_dir/output" &
      # The stdin fifo is opened read-write so the open never blocks and a writer that comes and
      # goes never delivers end-of-file.
      CORDON_RUN=$cordon_id setsid bash -lc "$5" <>"$cordon_dir/stdin" >"$cordon_dir/output" 2>&1 &
      printf '%s\n' "$!" >"$cordon_dir/pid"
      wait "$!"
      cordon_status=$?
      cordon_sweep "$cordon_id"
      printf '%s\n' "$cordon_status" >"$cordon_dir/exit.tmp" && mv -f -- "$cordon_dir/exit.tmp" "$cordon_dir/exit"
    ) </dev/null >/dev/null 2>&1 &
    exit 0
    ;;
  kill)
    cordon_find_wrapper "$cordon_id"
    cordon_sweep "$cordon_id" "$cordon_wrapper"
    ;;
  *)
    printf 'cordon-exec: unknown mode %s\n' "$cordon_mode" >&2
    exit 2
    ;;
esac
