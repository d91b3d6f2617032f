#!/usr/bin/env python3
"""An independent check of `mnemoc --emit=plan`: reads the JSON on stdin and
verifies, for each step function, that every buffer is aligned and inside
the arena, that no two buffers live at the same op share bytes, and that the
lower bound is what the lifetimes imply. Exits 1 on any violation."""
import json
import sys

plan = json.load(sys.stdin)
failures = 0
for f in plan["functions"]:
    buffers = f["buffers"]
    for b in buffers:
        if b["offset"] % f["alignment"] or b["offset"] < 0 or \
                b["offset"] + b["bytes"] > f["arena_bytes"]:
            print(f"@{f['function']}: buffer {b['id']} is misaligned or outside the arena")
            failures += 1
    # Sweep over ops: the buffers live at each op must not overlap.
    live_bytes = [0] * (f["ops"] + 1)
    for b in buffers:
        for op in range(b["first_op"], min(b["last_op"], f["ops"]) + 1):
            live_bytes[op] += b["bytes"]
    by_start = sorted(buffers, key=lambda b: b["first_op"])
    for i, a in enumerate(by_start):
        for b in by_start[i + 1:]:
            if b["first_op"] > a["last_op"]:
                break
            if a["offset"] < b["offset"] + b["bytes"] and b["offset"] < a["offset"] + a["bytes"]:
                print(f"@{f['function']}: buffers {a['id']} and {b['id']} overlap while both live")
                failures += 1
    if max(live_bytes) != f["lower_bound_bytes"]:
        print(f"@{f['function']}: lower bound {f['lower_bound_bytes']} but the lifetimes give "
              f"{max(live_bytes)}")
        failures += 1
    print(f"@{f['function']}: {len(buffers)} buffers, arena {f['arena_bytes']} bytes, "
          f"lower bound {f['lower_bound_bytes']}: {'ok' if not failures else 'FAILED'}")
sys.exit(1 if failures else 0)
