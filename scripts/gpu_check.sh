#!/bin/bash
# The backend suite on CUDA, on a GPU machine: builds kvconform against that machine's CUDA LibTorch
# (python3 -c "import torch") with the dependencies scripts/gpu_deps.sh packed into .devdeps/, then
# runs the backend tests and `kvconform run --suite backend --device cuda`. Logs go to $OUT (or /tmp).
set -uo pipefail
OUT=${OUT:-/tmp}
P=$PWD/.devdeps/usr
TP=$(python3 -c 'import torch.utils;print(torch.utils.cmake_prefix_path)')
python3 -c 'import torch;print("torch",torch.__version__,"cuda",torch.version.cuda,torch.cuda.get_device_name(0))' | tee $OUT/env.txt
nvidia-smi -L >> $OUT/env.txt 2>&1
B=/tmp/b
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TP;$P" -DOPENSSL_ROOT_DIR=$P \
  -DVALIJSON_INCLUDE_DIR=$PWD/.deps/valijson/usr/include -DKVC_WITH_GGML=OFF -DKVC_CCACHE=OFF > $OUT/cfg.log 2>&1 \
  || { tail -40 $OUT/cfg.log; exit 3; }
cmake --build $B -j16 --target kvc_backends_test kvconform > $OUT/build.log 2>&1 \
  || { grep -E "error|Error" -A4 $OUT/build.log | head -60; exit 4; }
export LD_LIBRARY_PATH=$P/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
$B/harness/kvc_backends_test 2>&1 | tee $OUT/backends_test.log | tail -25
$B/cli/kvconform run --suite backend --device cuda -v --no-report > $OUT/run_cuda.log 2>&1; echo "run exit $?"
tail -3 $OUT/run_cuda.log
grep -c ": OK" $OUT/run_cuda.log; grep -E "FAIL|DEVIATION" $OUT/run_cuda.log | head -20
