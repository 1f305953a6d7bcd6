#!/usr/bin/env bash
# The family x engine matrix: one configuration of each engine on the
# families set (make_models.py --set families: every family of the registry), and vLLM, whose CPU
# attention refuses their head_dim 16, on the vllm set (the same families drawn with head_dim 32/64),
# under the plans that cross, fill and roll back the window; then `kvconform site` writes the results
# as a site (reports/family-site, or $KVC_SITE_OUT), a family's column from each model's config.json.
# Engines that are not installed are SKIP columns' worth of "not installed" (bash scripts/engines.sh
# --setup-only and engines/setup_env.sh NAME install them). The left-padding configuration (transformers,
# a batch of two rows, one left-padded) and the micro-batch ones (llama.cpp n_ubatch 1, llama-server
# n_ubatch 3) run on every family here; CI runs them on a seeded sample (engines/models/sample.py).
# 658 s here with all installed, conversions cached, without those four configurations.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
families=build/engine-models-families vllm_set=build/engine-models-vllm
python3 engines/models/make_models.py "$families" --set families >/dev/null
python3 engines/models/make_models.py "$vllm_set" --set vllm >/dev/null
plans='/(prefill_lt_w|prefill_eq_w|prefill_gt_w|decode_across_w|extend_after_full|rollback|reload)$'
start=$(date +%s)
status=0
build/cli/kvconform engine --models "$families" --no-regressions --filter "$plans" --report-dir reports/family-matrix \
  --engine '^oracle$' --engine '^transformers-5.24.0/static/eager$' --engine '^llama\.cpp/default$' \
  --engine '^llama\.cpp-b11434/default$' --engine '^llama-server-b11434/default$' --engine '^mlx-lm$' \
  --engine '^openvino-2026.4.1/stateful$' --engine '^executorch-1.5.1/eager$' --engine '^ort_genai-0.18.0/fp32/window_cache$' \
  --engine '^transformers-5.25.0/dynamic/eager/left_padding=3$' --engine '^llama\.cpp/n_ubatch=1$' \
  --engine '^llama\.cpp-b11434/n_ubatch=1$' --engine '^llama-server-b11434/n_ubatch=3$' \
  > reports/family-matrix.log 2>&1 || status=$?
build/cli/kvconform engine --models "$vllm_set" --no-regressions --filter "$plans" --report-dir reports/family-matrix-vllm \
  --engine '^vllm-0.32.0/prefix_caching$' > reports/family-matrix-vllm.log 2>&1 || status=$?
echo "family matrix: $(( $(date +%s) - start )) s (exit $status: 1 means a FAIL, which the matrix shows)" >&2
tail -n 1 reports/family-matrix.log reports/family-matrix-vllm.log >&2
build/cli/kvconform site reports/family-matrix reports/family-matrix-vllm --models "$families" --models "$vllm_set" \
  --out "${KVC_SITE_OUT:-reports/family-site}"
