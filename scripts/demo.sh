#!/usr/bin/env bash
# The demo: installs what is missing, builds, then compiles the three example
# models (an MLP and a convnet for Fashion-MNIST, a GPT-style decoder), shows
# their parameters and their IR (forward, @train_step, @eval_step), and
# shows the memory plan of a GPT training step, and trains the MLP on
# Fashion-MNIST with the reference interpreter. (The
# compiled CPU and CUDA trainers come with later stages.)
set -uo pipefail
source "$(dirname "$0")/setup.sh"
cd "$MNEMO_ROOT"

mnemo_install_packages || exit 1
mnemo_build || exit 1

mnemoc="$MNEMO_BUILD/bin/mnemoc"
for model in mlp cnn gpt; do
  echo
  echo "================================================================"
  echo "  examples/$model.mn"
  echo "================================================================"
  "$mnemoc" "examples/$model.mn" --emit=params || exit 1
  echo
  "$mnemoc" "examples/$model.mn" --emit=mlir || exit 1
done

echo
echo "== Hyper-parameters are overridable: the GPT with 12 layers of width 768"
"$mnemoc" examples/gpt.mn -D layers=12 -D dim=768 -D heads=12 --emit=params | tail -n 1

echo
echo "== Where the bytes of one GPT training step go (the plan is made before anything runs)"
"$mnemoc" examples/gpt.mn --memory-report --memory-timeline=build/gpt-memory.svg || exit 1
echo "(the arena over one step, as a picture: build/gpt-memory.svg)"

echo
echo "== Training examples/mlp.mn on 2,000 Fashion-MNIST images with the reference interpreter"
"$MNEMO_BUILD/bin/mnemo-interp" examples/mlp.mn --data /usr/share/datasets/fashion-mnist \
  --limit 2000 --epochs 3 --eval || exit 1

echo
echo "== The same 5 AdamW steps in Mnemo and in PyTorch (f32)"
run=$(mktemp -d)
"$MNEMO_BUILD/bin/mnemo-interp" examples/gpt.mn -D layers=2 --steps 5 --dump "$run" >/dev/null &&
  /usr/bin/python3 test/reference/compare.py "$run" || exit 1
rm -rf "$run"

echo
echo "== A typo gets a clang-style error (and exit status 1):"
typo=$(mktemp --suffix=.mn)
sed 's/hidden, classes/hiden, classes/' examples/mlp.mn >"$typo"
"$mnemoc" "$typo" --emit=mlir >/dev/null
echo "(exit status $?)"
rm -f "$typo"
