# Injected into llama.cpp's configure by build_llama.sh (CMAKE_PROJECT_INCLUDE): every target but
# ggml's is compiled at -O1. ggml's kernels keep llama.cpp's own -O3: they are where an engine run
# spends its time. The rest is the llama library (the graph builders of about a hundred
# architectures, the KV cache, the vocabulary) and llama-server's closure (common/, tools/mtmd/,
# tools/server/, vendor/), which parse, serve, route and build graphs: at -O1 the two builds compile
# in about a fifth less CPU (docs/performance.md), and no result changes, because they are built
# for baseline x86-64 without -ffast-math (no FMA to contract into, no reassociation), where GCC
# keeps IEEE float semantics at every -O level.
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

function(_kvc_o1_but_ggml)
  _kvc_targets_under("${CMAKE_SOURCE_DIR}" targets)
  set(lowered "")
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(t MATCHES "^ggml.*$" OR NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    # After CMAKE_<LANG>_FLAGS_RELEASE on the command line: the last -O wins.
    set_property(TARGET ${t} APPEND PROPERTY COMPILE_OPTIONS -O1)
    list(APPEND lowered ${t})
  endforeach()
  message(STATUS "kvconform: -O1 for ${lowered}")
endfunction()

cmake_language(DEFER CALL _kvc_o1_but_ggml)
