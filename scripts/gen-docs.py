#!/usr/bin/env python3
"""Regenerates the real output shown in the docs.

A Markdown file marks generated regions like this:

    <!-- mnemoc: examples/mlp.mn --emit=params -->
    ...replaced by a fenced block with mnemoc's output (stdout and stderr)...
    <!-- end -->

    <!-- run: mnemo-interp examples/mlp.mn --steps 3 -->
    ...the same for any command (run by bash, with the build's bin/ first on
    PATH); keep these deterministic and quick...
    <!-- end -->

    <!-- measured: build/docs/mlp/train --data ... --steps 2 -->
    ...the same as run, for output whose digits depend on the machine: a
    trainer's or PyTorch's losses go through the CPU's BLAS kernels, whose
    f32 sums differ between CPUs, vector widths and thread counts. --check
    compares such a region's text with every decimal number (one with a
    point or an exponent) left out, so the words, the integers and the
    number of figures must match, and the figures are measured output...
    <!-- end -->

    <!-- generated: ops -->
    ...replaced by the op reference that add_mlir_doc generates from ODS...
    <!-- end -->

Commands run from the repository root; the root's absolute path is removed
from their output so the docs read the same on every machine. A command
whose shell or text tools complain (a quoting mistake: `sed: -e expression
...`) stops the run: a Mnemo tool's error may be what a doc shows, theirs
never is.

Usage: gen-docs.py BUILD_DIR [--check]
  --check  change nothing; exit 1 and name the stale files if any doc is out
           of date (the test suite runs this).
"""
import os
import pathlib
import re
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
REGION = re.compile(r"(<!-- (mnemoc|run|measured|generated): (.*?) -->\n)(.*?)(<!-- end -->)",
                    re.S)
# A decimal number in measured output: 5.5733337, 0.00308, 1e-05, -0.5.
MEASURED_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+(?=[eE]))(?:[eE][-+]?\d+)?")


def mnemoc_output(build: pathlib.Path, args: str) -> str:
    cmd = [str(build / "bin" / "mnemoc"), *shlex.split(args)]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    text = run.stdout + run.stderr
    text = text.replace(str(ROOT) + "/", "")
    if run.returncode != 0:
        text += f"(exit status {run.returncode})\n"
    return "```\n$ mnemoc " + args + "\n" + text.rstrip("\n") + "\n```\n"


# A complaint of the shell or of a text tool in a command's pipeline: the
# command is written wrong (quoting, a flag), which a doc must never show
# as the output it documents (a Mnemo tool's own errors are fine to show).
PIPELINE_ERROR = re.compile(r"^(bash|sh|sed|awk|grep|sort|head|tail|cut|tr|xargs|python3?): ",
                            re.M)


def command_output(build: pathlib.Path, command: str) -> str:
    env = dict(os.environ, PATH=f"{build / 'bin'}:{os.environ.get('PATH', '')}")
    run = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True,
                         env=env)
    bad = PIPELINE_ERROR.search(run.stderr)
    if bad:
        complaint = run.stderr[bad.start():].splitlines()[0]
        raise SystemExit(f"gen-docs: the command '{command}' is written wrong: {complaint}")
    text = (run.stdout + run.stderr).replace(str(ROOT) + "/", "")
    if run.returncode != 0:
        text += f"(exit status {run.returncode})\n"
    return "```\n$ " + command + "\n" + text.rstrip("\n") + "\n```\n"


def generated(build: pathlib.Path, what: str) -> str:
    if what in ("ops", "attributes"):
        name = "MnemoOps.md" if what == "ops" else "MnemoAttrs.md"
        text = (build / "docs" / "Mnemo" / name).read_text()
        # The generator's own title and table of contents are replaced by ours.
        text = re.sub(r"^\[TOC\]\n", "", text, flags=re.M)
        return text.strip("\n") + "\n"
    raise SystemExit(f"unknown generated region '{what}'")


def without_measured_figures(text: str) -> str:
    return MEASURED_NUMBER.sub("<measured>", text)


def regenerate(path: pathlib.Path, build: pathlib.Path, check: bool) -> str:
    """The file with every region's output made anew. When checking, a
    measured region whose text, figures left out, is unchanged keeps its
    figures, so that only a change of words or integers is stale."""
    def replace(match):
        kind, arg, old = match.group(2), match.group(3), match.group(4)
        if kind == "mnemoc":
            body = mnemoc_output(build, arg)
        elif kind in ("run", "measured"):
            body = command_output(build, arg)
            if (kind == "measured" and check and
                    without_measured_figures(body) == without_measured_figures(old)):
                body = old
        else:
            body = generated(build, arg)
        return match.group(1) + body + match.group(5)

    return REGION.sub(replace, path.read_text())


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    build = pathlib.Path(sys.argv[1]).resolve()
    check = "--check" in sys.argv[2:]
    stale = []
    for path in DOCS:
        new = regenerate(path, build, check)
        if new != path.read_text():
            stale.append(path.relative_to(ROOT))
            if not check:
                path.write_text(new)
    if check and stale:
        print("docs out of date (run scripts/gen-docs.py build): " +
              ", ".join(map(str, stale)))
        return 1
    if not check:
        print("regenerated: " + (", ".join(map(str, stale)) or "nothing changed"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
