# Injected into llama.cpp's configure by build_llama.sh (CMAKE_PROJECT_INCLUDE). Two rules for every
# target but ggml's, which keep llama.cpp's own flags: ggml's kernels are where an engine run spends
# its time and where its numbers come from.
#
# -O1. The rest is the llama library (the graph builders of about a hundred architectures, the KV
# cache, the vocabulary) and llama-server's closure (common/, tools/mtmd/, tools/server/, vendor/),
# which parse, serve, route and build graphs: at -O1 the two builds compile in about a fifth less CPU
# (docs/performance.md), and no result changes, because they are built for baseline x86-64 without
# -ffast-math (no FMA to contract into, no reassociation), where GCC keeps IEEE float semantics at
# every -O level. (-O0 for the server's closure compiles in 40 s less CPU but serves slower: an
# `engine --ci` run of llama-server took 7 s more CPU, and CI runs several.)
#
# Unity batches of 8 for llama-server's closure: its sources each parse nlohmann/json, cpp-httplib
# and the chat templates' headers again, and one batch parses them once (build 11434: 326 -> 252 s
# of CPU for the library and llama-server, the same results over every llama-server configuration).
# The llama library keeps its own unity settings (its models in batches of 16, the rest alone).
# mtmd-helper*.cpp refuse to share a translation unit with mtmd's internals (an #error guards it);
# larger batches meet clashing declarations between common/'s sources.
if(NOT CMAKE_CURRENT_SOURCE_DIR STREQUAL CMAKE_SOURCE_DIR)
  return()  # ggml's own project() call: only the top-level one defers the change
endif()

function(_kvc_targets_under dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _kvc_targets_under("${sub}" more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} "${targets}" PARENT_SCOPE)
endfunction()

function(_kvc_compile_rules)
  _kvc_targets_under("${CMAKE_SOURCE_DIR}" targets)
  set(lowered "")
  set(unity "")
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(t MATCHES "^ggml.*$" OR NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    # After CMAKE_<LANG>_FLAGS_RELEASE on the command line: the last -O wins.
    set_property(TARGET ${t} APPEND PROPERTY COMPILE_OPTIONS -O1)
    list(APPEND lowered ${t})
    if(t STREQUAL "llama")
      continue()
    endif()
    set_target_properties(${t} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
    get_target_property(sources ${t} SOURCES)
    get_target_property(source_dir ${t} SOURCE_DIR)
    foreach(src IN LISTS sources)
      if(src MATCHES "mtmd-helper[^/]*$")
        get_filename_component(src ${src} ABSOLUTE BASE_DIR ${source_dir})
        set_source_files_properties(${src} TARGET_DIRECTORY ${t} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
      endif()
    endforeach()
    list(APPEND unity ${t})
  endforeach()
  message(STATUS "kvconform: -O1 for ${lowered}")
  message(STATUS "kvconform: unity batches for ${unity}")
endfunction()

cmake_language(DEFER CALL _kvc_compile_rules)
