#!/usr/bin/env bash
# The demo: installs what is missing, builds, then does Mnemo's main job:
# compiles examples/mlp.mn into a CPU trainer, shows the memory plan of its
# training step (every byte, known before anything runs), trains one epoch
# of Fashion-MNIST and prints the test accuracy (it must reach 0.85). Then
# the same for a GPT on byte-level English for a few hundred steps, with a
# profile of where the step's time goes.
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
echo "(checkpoints: $out/mlp.safetensors and $out/gpt.safetensors, loadable in PyTorch;"
echo " the generated C++: $out/mlp/model.cpp; mnemoc examples/mlp.mn --emit=cpp shows it)"
