#!/usr/bin/env bash
# Builds ./predict against the libtorch inside the installed torch wheel, with g++ directly.
#   examples/cpp_inference/build.sh [OUTPUT] [PYTHON]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/predict}"
python="${2:-${PYTHON:-python3}}"
read -r torch_dir abi < <("$python" -c "import os, torch; print(os.path.dirname(torch.__file__), int(torch._C._GLIBCXX_USE_CXX11_ABI))")
${CXX:-g++} -std=c++20 -O1 -D_GLIBCXX_USE_CXX11_ABI="$abi" \
  -I"$torch_dir/include" -I"$torch_dir/include/torch/csrc/api/include" \
  "$here/predict.cpp" -o "$out" \
  -L"$torch_dir/lib" -Wl,-rpath,"$torch_dir/lib" -Wl,--no-as-needed -ltorch -ltorch_cpu -lc10 -Wl,--as-needed
echo "built $out"
