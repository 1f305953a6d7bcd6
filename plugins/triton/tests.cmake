# vLLM's and SGLang's Triton attention kernels under Triton's interpreter (plugins/triton/NOTES.md),
# each in the cache venv of `bash plugins/triton/setup_env.sh` (torch 2.13.0 CPU + triton 3.9.0 and the
# kernels' sources: 2.0 GB, about 4 minutes to install on a loaded machine; CI installs it, .ci/run): without it, skipped (77). Label: plugin.
# The interpreter runs a case of the built-in patterns in 1 to 2 s, so each test judges a few of them,
# chosen for what it shows; the numerics cases (4096 keys: 20 s each) are in the measured results only.
# tests/check_run.py (plugins/python) asserts the exit code and the output lines (in order).
find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(kvc_triton_check ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/../python/tests/check_run.py)
set(kvc_triton_needs "py=$(bash plugins/triton/setup_env.sh --check 2>/dev/null) || exit 77")
set(kvc_triton_run $<TARGET_FILE:kvconform> run --no-report --plugin-iterations 0)

# kvc_triton_test(name ADAPTER "file flags" [CASES folder] RUN kvconform-run-args... CHECK check_run-options...)
# CASES defaults to an empty folder: the built-in patterns only.
function(kvc_triton_test name)
  cmake_parse_arguments(T "" "ADAPTER;CASES" "RUN;CHECK" ${ARGN})
  if(NOT T_CASES)
    set(T_CASES ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../python/tests)
  endif()
  add_test(NAME ${name}
           COMMAND sh -c "${kvc_triton_needs}; exec \"$@\" --backend-cmd \"$py plugins/triton/${T_ADAPTER}\""
                   sh ${kvc_triton_check} ${T_CHECK} -- ${kvc_triton_run} --cases ${T_CASES} ${T_RUN}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES LABELS plugin SKIP_RETURN_CODE 77 TIMEOUT 300)
endfunction()

# The cases each test runs: a decode across the window, a prefill longer than the window, a
# left-padded batch (window, key padding and varlen forms), a chunked batch with left padding.
set(kvc_triton_cases "/kernel/(decode_across_window|prefill_longer_than_window|sliding_left_padding_batch|chunked_left_padding|full_attention)/static")

# --- vLLM triton_unified_attention over its paged cache: passes in float32 and float16
foreach(dtype float32 float16)
  kvc_triton_test(triton_vllm_unified_${dtype} ADAPTER vllm_triton_adapter.py
    RUN --filter "${kvc_triton_cases}" --dtype ${dtype}
    CHECK --exit 0 --expect "kernel/decode_across_window/static/${dtype}.*: OK"
          --expect "kernel/chunked_left_padding/static/${dtype}.*: OK"
          --expect "kernel/sliding_left_padding_batch/static/${dtype}.*: OK" --absent ": FAIL")
endforeach()
# its 3D decode path (split KV segments + reduce_segments), which decodes of a batch take
kvc_triton_test(triton_vllm_unified_decode_3d ADAPTER "vllm_triton_adapter.py --decode-3d"
  RUN --filter "/kernel/(decode_across_window|wrap_around_three_times)/static" --dtype float32
  CHECK --exit 0 --expect "decode_across_window/static/float32.*: OK" --absent ": FAIL")
# bfloat16 and float64: SKIP with the reasons (the interpreter's bfloat16 dot; float32 accumulation),
# and a run of SKIPs only is not green
kvc_triton_test(triton_vllm_unified_skips ADAPTER vllm_triton_adapter.py
  RUN --filter "/kernel/decode_across_window/static/(bfloat16|float64)"
  CHECK --exit 1 --expect "bfloat16.*: SKIP .*in bfloat16: Triton 3.9's interpreter computes a bfloat16 tl.dot wrongly"
        --expect "float64.*: SKIP .*in float64: the kernel accumulates in float32"
        --expect "^nothing was checked: every one of the 2 selected cases was skipped")
# window_size[0] = W: one key too many wherever the K/V hold more than W tokens (a long prefill)
kvc_triton_test(triton_vllm_unified_mutant_window_off_by_one+1 ADAPTER "vllm_triton_adapter.py --window-offset 1"
  RUN --filter "/kernel/prefill_longer_than_window/static" --dtype float32
  CHECK --exit 1 --expect "prefill_longer_than_window/static/float32.*: FAIL step 0 \\(Prefill\\(6\\)\\): attention \\(window\\) max error")
# window_size[0] = W - 2 (vLLM's window_size taken as the key count): one key short, decodes included
kvc_triton_test(triton_vllm_unified_mutant_window_off_by_one-1 ADAPTER "vllm_triton_adapter.py --window-offset -1"
  RUN --filter "/kernel/decode_across_window/static" --dtype float32
  CHECK --exit 1 --expect "decode_across_window/static/float32.*: FAIL step [0-9]+ .*: attention \\(window\\) max error")
# sinks dropped (sinks=None although the case sends gpt-oss's per-head sink logits): every row's
# softmax loses the sink's share, so the sinks form FAILs at the first step and the window form passes
kvc_triton_test(triton_vllm_unified_mutant_drop-sinks ADAPTER "vllm_triton_adapter.py --drop-sinks"
  RUN --filter "/kernel/decode_across_window/static" --dtype float32
  CHECK --exit 1 --expect "decode_across_window/static/float32.*: FAIL step 0 \\(Prefill\\(2\\)\\): attention \\(sinks\\) max error")
# chunk C + 1: chunk boundaries one token late
kvc_triton_test(triton_vllm_unified_mutant_chunk+1 ADAPTER "vllm_triton_adapter.py --chunk-offset 1"
  RUN --filter "/kernel/chunked_across_chunks/static" --dtype float32
  CHECK --exit 1 --expect "chunked_across_chunks/static/float32.*: FAIL step [0-9]+ .*: attention \\(window\\) max error")

# --- SGLang extend_attention_fwd with the backend's window rail: passes in float32 and float16
foreach(dtype float32 float16)
  kvc_triton_test(triton_sglang_extend_${dtype} ADAPTER sglang_extend_adapter.py
    RUN --filter "${kvc_triton_cases}" --dtype ${dtype}
    CHECK --exit 0 --expect "kernel/decode_across_window/static/${dtype}.*: OK"
          --expect "kernel/chunked_left_padding/static/${dtype}.*: SKIP .*does not declare chunked layers"
          --expect "kernel/sliding_left_padding_batch/static/${dtype}.*: OK" --absent ": FAIL")
endforeach()
# the whole prefix on sliding layers: the kernel's own window mask alone
kvc_triton_test(triton_sglang_extend_full_prefix ADAPTER "sglang_extend_adapter.py --full-prefix"
  RUN --filter "/kernel/(prefill_longer_than_window|sliding_left_padding_batch)/static" --dtype float32
  CHECK --exit 0 --expect "prefill_longer_than_window/static/float32.*: OK" --absent ": FAIL")
kvc_triton_test(triton_sglang_extend_mutant_window_off_by_one+1 ADAPTER "sglang_extend_adapter.py --window-offset 1"
  RUN --filter "/kernel/prefill_longer_than_window/static" --dtype float32
  CHECK --exit 1 --expect "prefill_longer_than_window/static/float32.*: FAIL step 0 \\(Prefill\\(6\\)\\): attention \\(window\\) max error")
kvc_triton_test(triton_sglang_extend_mutant_window_off_by_one-1 ADAPTER "sglang_extend_adapter.py --window-offset -1"
  RUN --filter "/kernel/decode_across_window/static" --dtype float32
  CHECK --exit 1 --expect "decode_across_window/static/float32.*: FAIL step [0-9]+ .*: attention \\(window\\) max error")

kvc_triton_test(triton_sglang_extend_mutant_drop-sinks ADAPTER "sglang_extend_adapter.py --drop-sinks"
  RUN --filter "/kernel/decode_across_window/static" --dtype float32
  CHECK --exit 1 --expect "decode_across_window/static/float32.*: FAIL step 0 \\(Prefill\\(2\\)\\): attention \\(sinks\\) max error")

# a window of 1 key: sliding_window_size 0, which the kernel (and the backend) take for "no window"
# (NOTES.md, "Findings"): full attention, so the golden case of W = 1 FAILs at its prefill
kvc_triton_test(triton_sglang_extend_window1_finding ADAPTER sglang_extend_adapter.py CASES ${PROJECT_SOURCE_DIR}/cases
  RUN --filter "golden-kernel/window1_static_sliding/" --dtype float32
  CHECK --exit 1
        --expect "window1_static_sliding/sliding_attention/float32.*: FAIL step 0 \\(Prefill\\(3\\)\\): attention \\(window\\) max error")

# --- SGLang decode_attention_fwd: the kernel passes on a rail of the W keys a query sees ...
# (fewer cases: every query of a prefill is a decode row, 8 KV splits each; the left-padded batch
# takes 30 s in its four forms, so it is in the measured results only)
foreach(dtype float32 float16)
  kvc_triton_test(triton_sglang_decode_${dtype} ADAPTER "sglang_decode_adapter.py --rail window"
    RUN --filter "/kernel/(decode_across_window|prefill_longer_than_window|wrap_around_three_times)/static"
        --dtype ${dtype}
    CHECK --exit 0 --expect "kernel/decode_across_window/static/${dtype}.*: OK"
          --expect "kernel/wrap_around_three_times/static/${dtype}.*: OK" --absent ": FAIL")
endforeach()
# W + 1 keys: shows only where a row's sequence is longer than W + 1 (rows of a long prefill)
kvc_triton_test(triton_sglang_decode_mutant_window_off_by_one+1 ADAPTER "sglang_decode_adapter.py --rail window --window-offset 1"
  RUN --filter "/kernel/prefill_longer_than_window/static" --dtype float32
  CHECK --exit 1 --expect "prefill_longer_than_window/static/float32.*: FAIL step 0 \\(Prefill\\(6\\)\\): attention \\(window\\) max error")
kvc_triton_test(triton_sglang_decode_mutant_window_off_by_one-1 ADAPTER "sglang_decode_adapter.py --rail window --window-offset -1"
  RUN --filter "/kernel/decode_across_window/static" --dtype float32
  CHECK --exit 1 --expect "decode_across_window/static/float32.*: FAIL step [0-9]+ .*: attention \\(window\\) max error")
kvc_triton_test(triton_sglang_decode_mutant_drop-sinks ADAPTER "sglang_decode_adapter.py --rail window --drop-sinks"
  RUN --filter "/kernel/decode_across_window/static" --dtype float32
  CHECK --exit 1 --expect "decode_across_window/static/float32.*: FAIL step 0 \\(Prefill\\(2\\)\\): attention \\(sinks\\) max error")
# ... and FAILs on the rail SGLang 0.5.23's Triton backend fills (min(seq_len, sliding_window_size):
# W - 1 keys, NOTES.md "Finding"): the first decode past the window drops its oldest key.
kvc_triton_test(triton_sglang_decode_backend_rail_finding ADAPTER "sglang_decode_adapter.py --rail backend"
  RUN --filter "/kernel/(decode_across_window|full_attention)/static" --dtype float32
  CHECK --exit 1
        --expect "decode_across_window/static/float32.*: FAIL step 2 \\(Decode after 3 tokens\\): attention \\(window\\) max error"
        --expect "full_attention/static/float32.*: OK")
# the finding's shrunk case (the campaign's, saved with --save-regressions into the corpus folder of
# every sglang_triton_decode_* adapter, regressions/plugin/sglang_triton_decode/): a 2-token prefill, W = 2
foreach(rail backend window)
  if(rail STREQUAL backend)
    set(kvc_triton_exit 1)
    set(kvc_triton_verdict "FAIL step 0 \\(Prefill\\(2\\)\\): attention \\(window\\) max error")
  else()
    set(kvc_triton_exit 0)
    set(kvc_triton_verdict "OK")
  endif()
  kvc_triton_test(triton_sglang_decode_shrunk_case_${rail}_rail ADAPTER "sglang_decode_adapter.py --rail ${rail}"
    RUN --regressions ${PROJECT_SOURCE_DIR}/regressions --filter regressions/kernel/sglang_triton_decode/
    CHECK --exit ${kvc_triton_exit}
          --expect "regressions/kernel/sglang_triton_decode/7996717f51a958ef/sliding_attention/float32.*: ${kvc_triton_verdict}")
endforeach()
