#!/usr/bin/env bash
# The demo: installs what is missing, builds, then compiles the three example
# models (an MLP and a convnet for Fashion-MNIST, a GPT-style decoder) and
# shows their parameters and their IR. Later stages train them.
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
echo "== A typo gets a clang-style error (and exit status 1):"
typo=$(mktemp --suffix=.mn)
sed 's/hidden, classes/hiden, classes/' examples/mlp.mn >"$typo"
"$mnemoc" "$typo" --emit=mlir >/dev/null
echo "(exit status $?)"
rm -f "$typo"
