#!/usr/bin/env bash
# Layers point only down (docs/architecture.md): the harness library includes nothing from the
# generators (kvcgen/) or RapidCheck, and RapidCheck's internal runner (rc::detail) is reached from
# one adapter file. Run by ctest (layers_point_down); prints every offending line and exits 1.
cd "$(dirname "$0")/.."
status=0
if grep -rnE '#include [<"](kvcgen/|rapidcheck)' harness/src harness/include harness/report; then
  echo "harness/ reaches up into generators/ or RapidCheck (lines above)"; status=1
fi
users=$(grep -rlE 'rc::detail' --include='*.cpp' --include='*.h' harness generators plugins fuzz | grep -vE '^generators/(src/rc_check.cpp|include/kvcgen/rc_check.h)$' || true)
if [ -n "$users" ]; then
  echo "rc::detail outside generators/src/rc_check.cpp: $users"; status=1
fi
[ $status -eq 0 ] && echo "layers point down; rc::detail only in generators/src/rc_check.cpp"
exit $status
