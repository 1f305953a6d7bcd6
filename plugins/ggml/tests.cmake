# ctest (label plugin) for the ggml plugins, included from plugins/CMakeLists.txt when KVC_WITH_GGML.
set(_kvc_expect ${PROJECT_SOURCE_DIR}/cmake/expect_run.cmake)
set(_kvc_run "$<TARGET_FILE:kvconform>|run|--no-report")  # "|"-separated for expect_run.cmake
# The found cases of regressions/plugin/kvc_ggml/ (the family folder of every kvc_ggml_* plugin), alone.
set(_kvc_regressions "--plugin-iterations|0|--regressions|${PROJECT_SOURCE_DIR}/regressions|--filter|/regressions/|--plugin")

function(kvc_ggml_test name)  # kvc_ggml_test(<name> <expect_run.cmake -D arguments>...)
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} ${ARGN} -P ${_kvc_expect} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES LABELS plugin TIMEOUT 900)
endfunction()

# The real kernels pass every kernel check, golden cases' sequences and the regressions included;
# float64 is SKIP (ggml has no such type).
foreach(p kvc_ggml_flash kvc_ggml_softmax)
  kvc_ggml_test(plugin_${p} "-DCOMMAND=${_kvc_run}|--plugin-iterations|25|--plugin|$<TARGET_FILE:${p}>" -DEXPECT_EXIT=0)
  kvc_ggml_test(plugin_${p}_regressions "-DCOMMAND=${_kvc_run}|${_kvc_regressions}|$<TARGET_FILE:${p}>" -DEXPECT_EXIT=0)
endforeach()

# n_swa = W + 1 (one key too many) must fail the window check, with the check named.
foreach(p kvc_ggml_mutant_flash_n_swa_plus_one kvc_ggml_mutant_softmax_n_swa_plus_one)
  kvc_ggml_test(plugin_${p} "-DCOMMAND=${_kvc_run}|--plugin-iterations|5|--plugin|$<TARGET_FILE:${p}>" -DEXPECT_EXIT=1
                "-DEXPECT_REGEX=kernel/[^:]*: FAIL step [^:]*: attention \\(window\\) max error")
endforeach()

# Sinks declared and left out must fail the sinks form while the window form passes.
foreach(p kvc_ggml_mutant_flash_drop_sinks kvc_ggml_mutant_softmax_drop_sinks)
  kvc_ggml_test(plugin_${p} "-DCOMMAND=${_kvc_run}|--plugin-iterations|0|--filter|/kernel/decode_across_window/|--plugin|$<TARGET_FILE:${p}>"
                -DEXPECT_EXIT=1 "-DEXPECT_REGEX=kernel/decode_across_window/[^:]*: FAIL step 0 [^:]*: attention \\(sinks\\) max error"
                "-DREJECT_REGEX=attention \\(window\\) max error")
endforeach()

# The regressions (README.md): each fails on the build that keeps ggml's / llama.cpp's raw behaviour.
kvc_ggml_test(plugin_kvc_ggml_softmax_raw_empty_rows
              "-DCOMMAND=${_kvc_run}|${_kvc_regressions}|$<TARGET_FILE:kvc_ggml_softmax_raw_empty_rows>" -DEXPECT_EXIT=1
              "-DEXPECT_REGEX=regressions/kernel/kvc_ggml/d79b8f3c59bfb0cd/[^:]*: FAIL step 0 \\(Prefill\\(2\\)\\): attention \\(window\\) NaN")
# f32 K/V cast to f16: the kernel then computes as a float16 kernel does (f16 storage, f16 V
# accumulation), so every failure is a float32 bound (1e-6) missed by less than the float16 floor
# (2e-3): measured up to 1.16e-3 on the numerics cases (head_dim 256, 4096 keys), under 5e-4 on
# the short ones; never NaN, never a float16/bfloat16 bound.
kvc_ggml_test(plugin_kvc_ggml_flash_cast_f16
              "-DCOMMAND=${_kvc_run}|${_kvc_regressions}|$<TARGET_FILE:kvc_ggml_flash_cast_f16>" -DEXPECT_EXIT=1
              "-DEXPECT_REGEX=regressions/kernel/kvc_ggml/04d306285927379a/[^:]*: FAIL [^>]*max error [0-9.]+e-0[4-6] > bound 1.00e-06"
              "-DREJECT_REGEX=NaN|> bound [0-9.]+e-0[0-5]|max error [0-9.]+e[-+]0[0-2] |max error [2-9][.][0-9]+e-03 ")

# The same plugins built out of tree against an installed kvconform (plugins/ggml/CMakeLists.txt on
# its own), checked by the installed CLI.
add_test(NAME plugin_ggml_out_of_tree
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/../tests/out_of_tree_test.sh ${CMAKE_BINARY_DIR} ${CMAKE_CURRENT_LIST_DIR}
                 ${CMAKE_BINARY_DIR}/ggml-out-of-tree-test ${PROJECT_SOURCE_DIR}/cases kvc_ggml_flash,kvc_ggml_softmax
                 -DKVC_GGML_ROOT=${KVC_GGML_ROOT})
set_tests_properties(plugin_ggml_out_of_tree PROPERTIES LABELS plugin TIMEOUT 900)

# The same-dtype reference's quantized K/V (harness/include/kvconform/engine/kv_blocks.h) against the
# linked ggml's q8_0 and q4_0 rows, bit for bit (docs/engines.md, "Quantized K/V").
add_executable(kvc_ggml_kv_blocks_test ${PROJECT_SOURCE_DIR}/plugins/tests/ggml_kv_blocks_test.cpp)
target_include_directories(kvc_ggml_kv_blocks_test PRIVATE ${KVC_GGML_ROOT}/include ${PROJECT_SOURCE_DIR}/harness/include)
target_link_libraries(kvc_ggml_kv_blocks_test PRIVATE ${KVC_GGML_LIB_ggml} ${KVC_GGML_LIB_ggml-cpu} ${KVC_GGML_LIB_ggml-base}
                                                      GTest::gtest_main Threads::Threads ${CMAKE_DL_LIBS})
add_test(NAME plugin_ggml_kv_blocks COMMAND kvc_ggml_kv_blocks_test)
set_tests_properties(plugin_ggml_kv_blocks PROPERTIES LABELS plugin)
