# ctest (label plugin) for the ggml plugins, included from plugins/CMakeLists.txt when KVC_WITH_GGML.
set(_kvc_expect ${PROJECT_SOURCE_DIR}/cmake/expect_run.cmake)
set(_kvc_run $<TARGET_FILE:kvconform> run --no-report --plugin-iterations 25 --plugin)

# The real kernels pass every kernel check they do not declare unsupported (float64).
foreach(p kvc_ggml_flash kvc_ggml_softmax)
  add_test(NAME plugin_${p}
           COMMAND ${CMAKE_COMMAND} "-DCOMMAND=${_kvc_run};$<TARGET_FILE:${p}>" -DEXPECT_EXIT=0 -P ${_kvc_expect}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endforeach()

# n_swa = W + 1 (one key too many) must fail the window check, with the check named; the explicit
# mask form of the same steps must not be what fails (it does not go through n_swa).
foreach(p kvc_ggml_mutant_flash_n_swa_plus_one kvc_ggml_mutant_softmax_n_swa_plus_one)
  add_test(NAME plugin_${p}
           COMMAND ${CMAKE_COMMAND} "-DCOMMAND=${_kvc_run};$<TARGET_FILE:${p}>" -DEXPECT_EXIT=1
                   "-DEXPECT_REGEX=FAIL[^\n]*kernel/[^\n]*attention \\(window\\) max error"
                   "-DREJECT_REGEX=attention \\(explicit mask\\)" -P ${_kvc_expect}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endforeach()

# The same plugins built out of tree against an installed kvconform (plugins/ggml/CMakeLists.txt on
# its own), checked by the installed CLI.
add_test(NAME plugin_ggml_out_of_tree
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/../tests/out_of_tree_test.sh ${CMAKE_BINARY_DIR} ${CMAKE_CURRENT_LIST_DIR}
                 ${CMAKE_BINARY_DIR}/ggml-out-of-tree-test ${PROJECT_SOURCE_DIR}/cases kvc_ggml_flash,kvc_ggml_softmax
                 -DKVC_GGML_ROOT=${KVC_GGML_ROOT})
set_tests_properties(plugin_kvc_ggml_flash plugin_kvc_ggml_softmax plugin_kvc_ggml_mutant_flash_n_swa_plus_one
                     plugin_kvc_ggml_mutant_softmax_n_swa_plus_one plugin_ggml_out_of_tree
                     PROPERTIES LABELS plugin TIMEOUT 900)
