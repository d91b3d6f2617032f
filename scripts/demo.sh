#!/usr/bin/env bash
# The demo: installs what is missing, builds, then does Mnemo's main job:
# compiles examples/mlp.mn into a CPU trainer, shows the memory plan of its
# training step (every byte, known before anything runs), trains one epoch
# of Fashion-MNIST and prints the test accuracy (it must reach 0.85). Then
# the same for a GPT on byte-level English for a few hundred steps, with a
# profile of where the step's time goes, and the GPT's memory plan in f32
# next to bf16 (mixed precision, a compiler pass).
set -uo pipefail
source "$(dirname "$0")/setup.sh"
cd "$MNEMO_ROOT"

mnemo_install_packages || exit 1
mnemo_build || exit 1

mnemoc="$MNEMO_BUILD/bin/mnemoc"
out="$MNEMO_BUILD/demo"
mkdir -p "$out"

echo
echo "== examples/mlp.mn: where the bytes of one training step go"
"$mnemoc" examples/mlp.mn --memory-report || exit 1

echo
echo "== Compiling examples/mlp.mn into a CPU trainer ($out/mlp/train)"
"$mnemoc" examples/mlp.mn -o "$out/mlp" || exit 1

echo
echo "== Training one epoch of Fashion-MNIST on the CPU"
"$out/mlp/train" --data /usr/share/datasets/fashion-mnist --epochs 1 --eval \
  --save "$out/mlp.safetensors" --summary-json "$out/mlp-summary.json" || exit 1
accuracy=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["evaluations"][-1]["accuracy"])' "$out/mlp-summary.json")
if /usr/bin/python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 0.85 else 1)' "$accuracy"; then
  echo "test accuracy after one epoch: $accuracy (>= 0.85)"
else
  echo "test accuracy after one epoch: $accuracy, below 0.85" >&2
  exit 1
fi

echo
echo "== examples/gpt.mn on ~2.5 MB of English (Debian's fortunes), byte tokens"
/usr/bin/python3 scripts/make-tokens.py "$out/tokens" || exit 1
"$mnemoc" examples/gpt.mn -o "$out/gpt" || exit 1
"$out/gpt/train" --data "$out/tokens/train.bin" --steps 300 --eval --profile \
  --save "$out/gpt.safetensors" || exit 1

echo
echo "== Mixed precision: the GPT's training step planned in f32 and in bf16"
/usr/bin/python3 - "$mnemoc" <<'PY' || exit 1
import subprocess, sys
def report(precision):
    out = subprocess.run([sys.argv[1], "examples/gpt.mn", "--precision=" + precision,
                          "--memory-report"], capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.split("@eval_step")[0].splitlines():
        for key in ("parameters", "gradients", "optimizer state", "arena",
                    "activations at the peak", "workspace", "peak (one step needs)"):
            if line.strip().startswith(key) and key not in rows:
                rest = line.strip()[len(key):].split()
                rows[key] = " ".join(rest[:2])
    return rows
f32, bf16 = report("fp32"), report("bf16")
print("%-26s %12s %12s" % ("", "f32", "bf16"))
for key in f32:
    print("%-26s %12s %12s" % (key, f32[key], bf16[key]))
PY

echo
echo "(checkpoints: $out/mlp.safetensors and $out/gpt.safetensors, loadable in PyTorch;"
echo " the generated C++: $out/mlp/model.cpp; mnemoc examples/mlp.mn --emit=cpp shows it)"
