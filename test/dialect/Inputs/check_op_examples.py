"""Parses and verifies every op's example in docs/ir.md's op reference.

The examples are written by hand in the ODS descriptions (lang/ops/*/*.td)
and copied into docs/ir.md by scripts/gen-docs.py; nothing else reads them,
so one that no longer parses, or that its op's verifier rejects, would
mislead a reader for good. Each example's operands are not defined in it:
this script declares them as arguments of a function, with the types the
example's own type list gives them, and runs mnemo-opt on the function.

Each op has one example. An example whose operand types the script cannot
tell (elided as `(...)`, or a format it does not know) fails: an example
gives its types.

usage: check_op_examples.py docs/ir.md MNEMO_OPT
"""

import re
import subprocess
import sys


def split_top(text, separator=","):
    """Splits at separators outside <>, (), [] and {}."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == separator and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def type_section(example):
    """The example's text after its last top-level ':' (its types)."""
    depth = 0
    colon = None
    for i, ch in enumerate(example):
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        elif ch == ":" and depth == 0:
            colon = i
    return None if colon is None else example[colon + 1:].strip()


def operand_types(op, operands, types):
    """The type of each operand, from the op's format; None if unknown."""
    if types.startswith("("):
        # functional-type(operands, results)
        inputs = types[1:types.index(")")] if ")" in types else ""
        listed = split_top(inputs)
        if len(listed) != len(operands):
            return None
        return listed
    listed = split_top(types.split("->")[0])
    if len(listed) == 1:
        # `: T`: every operand (and the result) has the type T.
        return listed * len(operands)
    if op == "mnemo.where" and len(listed) == 2:
        return [listed[0]] + [listed[1]] * (len(operands) - 1)
    if len(listed) == len(operands):
        return listed
    return None


def main():
    doc, mnemo_opt = sys.argv[1], sys.argv[2]
    text = open(doc).read()
    reference = text[text.index("## Op reference"):]
    checked, failures, examples = 0, [], []
    # One section per op, each with one example.
    for section in re.split(r"\n(?=### `mnemo\.)", reference)[1:]:
        name = re.match(r"### `(mnemo\.\w+)`", section).group(1)
        found = re.findall(r"```mlir\n(.*?)```", section, re.S)
        if len(found) != 1:
            failures.append((name, f"{len(found)} examples, not 1", ""))
        examples += found
    for example in examples:
        flat = " ".join(example.split())
        match = re.match(r"(?:%[\w, %]+ = )?(mnemo\.\w+)", flat)
        if not match:
            failures.append(("?", "no op in the example", example))
            continue
        op = match.group(1)
        types = type_section(flat)
        body = flat[match.end():]
        # Operands: the %names the example uses before its attributes and
        # types (prune_masks names each one's type beside it, `%w : T`);
        # those it defines are its results.
        beside = op == "mnemo.prune_masks"
        defined = set(re.findall(r"%\w+", flat[:match.start(1)]))
        operands = body if beside else body.split(" : ")[0]
        used = []
        for name in re.findall(r"%\w+", operands):
            if name not in defined and name not in used:
                used.append(name)
        if beside:
            typed = dict(re.findall(r"(%\w+) : ([\w<>]+)", body))
            listed = [typed.get(n) for n in used]
        else:
            listed = operand_types(op, used, types)
        if types is None or listed is None or None in listed:
            failures.append((op, "cannot tell its operands' types", example))
            continue
        arguments = ", ".join(f"{n}: {t}" for n, t in zip(used, listed))
        module = f"func.func @example({arguments}) {{\n{example}\n  return\n}}\n"
        result = subprocess.run([mnemo_opt, "-"], input=module, text=True,
                                capture_output=True)
        if result.returncode != 0:
            failures.append((op, result.stderr.strip(), example))
            continue
        checked += 1
    for op, why, example in failures:
        print(f"FAIL {op}:\n{example}\n{why}\n")
    print(f"{checked} examples parse and verify, {len(failures)} do not")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
