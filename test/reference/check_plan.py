#!/usr/bin/env python3
"""An independent check of `mnemoc --emit=plan`: reads the JSON on stdin and
verifies, for each step function and each region (the arena, the gradient
region), that every buffer is aligned and inside its region, that no two
buffers live at the same op share bytes, and that the arena's lower bound is
what the lifetimes imply. Exits 1 on any violation."""
import json
import sys

plan = json.load(sys.stdin)
failures = 0
for f in plan["functions"]:
    sizes = {"arena": f["arena_bytes"], "gradients": f["gradient_bytes"]}
    for region, size in sizes.items():
        buffers = [b for b in f["buffers"] if b["region"] == region]
        for b in buffers:
            if b["offset"] % f["alignment"] or b["offset"] < 0 or b["offset"] + b["bytes"] > size:
                print(f"@{f['function']}: buffer {b['id']} is misaligned or outside the {region}")
                failures += 1
        by_start = sorted(buffers, key=lambda b: b["first_op"])
        for i, a in enumerate(by_start):
            for b in by_start[i + 1:]:
                if b["first_op"] > a["last_op"]:
                    break
                if a["offset"] < b["offset"] + b["bytes"] and b["offset"] < a["offset"] + a["bytes"]:
                    print(f"@{f['function']}: buffers {a['id']} and {b['id']} overlap while both live")
                    failures += 1
        if region == "arena":
            live_bytes = [0] * (f["ops"] + 1)
            for b in buffers:
                for op in range(b["first_op"], min(b["last_op"], f["ops"]) + 1):
                    live_bytes[op] += b["bytes"]
            if max(live_bytes, default=0) != f["lower_bound_bytes"]:
                print(f"@{f['function']}: lower bound {f['lower_bound_bytes']} but the lifetimes "
                      f"give {max(live_bytes)}")
                failures += 1
    print(f"@{f['function']}: {len(f['buffers'])} buffers, arena {f['arena_bytes']} bytes, "
          f"lower bound {f['lower_bound_bytes']}, gradients {f['gradient_bytes']}: "
          f"{'ok' if not failures else 'FAILED'}")
sys.exit(1 if failures else 0)
