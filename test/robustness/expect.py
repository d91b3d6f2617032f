#!/usr/bin/env python3
"""Runs one bad-input case and checks that it ends as the README promises.

Usage: expect.py [--status N] [--message TEXT]... [--no-message TEXT]...
                 [--keep DIR]... [--timeout S] -- COMMAND [ARG...]

- the command exits with status N (default 1): not a crash (a signal, or
  abort's 134), not a hang (it must end within --timeout seconds);
- each --message TEXT appears in what it printed (stdout and stderr), and
  no --no-message TEXT does;
- every file under each --keep DIR (recursively) that existed before is
  there afterwards with the same bytes, and no temporary file
  ("NAME.tmp.PID") is left behind.

Prints one line, "ok: ..." or "FAIL: ..." with what differed, and exits 0
or 1.
"""
import argparse
import hashlib
import os
import re
import subprocess
import sys


def snapshot(dirs):
    files = {}
    for top in dirs:
        for root, _, names in os.walk(top):
            for name in names:
                path = os.path.join(root, name)
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                with open(path, "rb") as f:
                    files[path] = hashlib.sha256(f.read()).hexdigest()
    return files


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--status", type=int, default=1)
    parser.add_argument("--message", action="append", default=[])
    parser.add_argument("--no-message", action="append", default=[])
    parser.add_argument("--keep", action="append", default=[])
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    before = snapshot(args.keep)
    try:
        run = subprocess.run(command, capture_output=True, text=True, errors="replace",
                             timeout=args.timeout, stdin=subprocess.DEVNULL)
        status, output = run.returncode, run.stdout + run.stderr
    except subprocess.TimeoutExpired as e:
        status = None
        output = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(
            errors="replace")
    problems = []
    if status is None:
        problems.append(f"still running after {args.timeout:g} s (a hang)")
    elif status < 0:
        problems.append(f"killed by signal {-status} (a crash)")
    elif status != args.status:
        problems.append(f"exit status {status}, expected {args.status}")
    for text in args.message:
        if text not in output:
            problems.append(f"no message {text!r}")
    for text in args.no_message:
        if text in output:
            problems.append(f"a message {text!r}")
    after = snapshot(args.keep)
    for path, digest in before.items():
        if path not in after:
            problems.append(f"{path} was removed")
        elif after[path] != digest:
            problems.append(f"{path} was changed")
    for path in after:
        if re.search(r"\.tmp\.\d+$", path):
            problems.append(f"{path} was left behind")
    name = os.path.basename(command[0])
    if problems:
        print(f"FAIL: {name}: " + "; ".join(problems))
        print("output was:\n" + output)
        return 1
    first = next((line for line in output.splitlines() if "error" in line), "")
    print(f"ok: {name} exits {status}: {first.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
