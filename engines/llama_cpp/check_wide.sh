#!/bin/sh
# llama.cpp at a real window size: the fixed plans on the wide gemma2 draw (W = 128, two sliding
# layers), written by make_models.py --set wide (its sensitivity checked). Every plan passes but the
# four context-shift plans, which crash (finding 40, a known deviation); told W + 1, it fails the plans past the window
# with that diagnosis. check_wide.sh KVCONFORM MODEL_ORACLE OUT_DIR; exit 77 without the worker.
set -u
kvconform=$1 oracle=$2 dir=$3
test -x build-llama/kvc_llama_worker || exit 77
python3 engines/models/make_models.py "$dir" --set wide --only wide-gemma2-0-0 --oracle "$oracle" || exit 1
out=$("$kvconform" engine --models "$dir" --model '^wide-gemma2-0-0$' --engine '^llama\.cpp/default$' --no-report 2>&1)
echo "$out" | grep '^engine/'
echo "$out" | grep -q '41 passed, 0 failed, 0 skipped (4 known engine deviations)' || { echo "check_wide: expected 37 passed (the preempt and turn plans included) and the 4 shift plans finding 40's known deviation"; exit 1; }
crashed=$(echo "$out" | grep -c '^engine/.*/shift_[a-z_]*(W=128.*: DEVIATION .*finding 40.*SIGABRT')
[ "$crashed" -eq 4 ] || { echo "check_wide: expected the 4 shift plans to crash (SIGABRT), got $crashed"; exit 1; }
bad=$("$kvconform" engine --models "$dir" --model '^wide-gemma2-0-0$' --engine '^llama\.cpp/default$' --mutant window_off_by_one+1 \
      --filter 'prefill_gt_w|decode_across_w' --no-report 2>&1)
echo "$bad" | grep '^engine/'
echo "$bad" | grep -q ': OK' && { echo "check_wide: a plan passed with the window told W+1"; exit 1; }
echo "$bad" | grep -q 'consistent with a window of W+1' || { echo "check_wide: W+1 not diagnosed"; exit 1; }
echo "check_wide: OK"
