"""Drives a command on a pseudo-terminal, as a person at a terminal would.

usage: pty-session.py SCRIPT.json -- COMMAND...

SCRIPT.json is a list of steps, played in order:
  {"expect": "text"}            wait until the output so far contains text (30 s at most)
  {"send": "text"}              type text
  {"resize": [rows, columns]}   resize the terminal (the foreground process gets SIGWINCH)
  {"signal": "SIGTERM"}         send the command a signal, as `kill` or a CI runner does

The command starts on a 24x80 terminal that is its controlling terminal. When it has exited,
one JSON line goes to stdout: {"exitCode", "output", "canonical", "echo"} where canonical/echo
say whether the terminal was left in cooked mode with echo on (as a shell expects it back).
"""

import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time


def set_size(fd, rows, columns):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def main():
    steps = json.load(open(sys.argv[1]))
    command = sys.argv[sys.argv.index("--") + 1 :]
    master, slave = os.openpty()
    set_size(master, 24, 80)

    def controlling_terminal():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    child = subprocess.Popen(
        command,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        preexec_fn=controlling_terminal,
        close_fds=True,
    )
    output = b""

    def read_for(seconds):
        nonlocal output
        ready, _, _ = select.select([master], [], [], seconds)
        if ready:
            try:
                output += os.read(master, 65536)
            except OSError:
                return False
        return True

    for step in steps:
        if "expect" in step:
            deadline = time.monotonic() + 30
            wanted = step["expect"].encode()
            while wanted not in output and time.monotonic() < deadline:
                if not read_for(0.1) or child.poll() is not None and not read_for(0):
                    break
            if wanted not in output:
                sys.stderr.write(f"did not see {step['expect']!r} in {output!r}\n")
                child.kill()
                sys.exit(2)
        elif "send" in step:
            os.write(master, step["send"].encode())
        elif "resize" in step:
            rows, columns = step["resize"]
            # The kernel sends SIGWINCH to the terminal's foreground process group.
            set_size(master, rows, columns)
        elif "signal" in step:
            os.kill(child.pid, getattr(signal, step["signal"]))

    exit_code = child.wait(timeout=60)
    while read_for(0.2):
        if not select.select([master], [], [], 0)[0]:
            break
    attributes = termios.tcgetattr(slave)
    print(
        json.dumps(
            {
                "exitCode": exit_code,
                "output": output.decode("utf-8", "replace"),
                "canonical": bool(attributes[3] & termios.ICANON),
                "echo": bool(attributes[3] & termios.ECHO),
            }
        )
    )


main()
