# Injected into llama.cpp's configure by build_llama.sh (CMAKE_PROJECT_INCLUDE): every target but the
# ones that compute (ggml's and the llama library) is compiled at -O1. llama-server's closure is
# mostly code that parses, serves and routes (common/, tools/mtmd/, tools/server/, vendor/): at -O1
# build 11434 compiles in 30 % less CPU (docs/performance.md), and no result changes, because those
# targets are built for baseline x86-64 without -ffast-math (no FMA to contract into, no
# reassociation) while the kernels, the graph and the model code keep llama.cpp's own -O3.
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

function(_kvc_orchestration_o1)
  _kvc_targets_under("${CMAKE_SOURCE_DIR}" targets)
  set(lowered "")
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(t MATCHES "^(ggml.*|llama)$" OR NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    # After CMAKE_<LANG>_FLAGS_RELEASE on the command line: the last -O wins.
    set_property(TARGET ${t} APPEND PROPERTY COMPILE_OPTIONS -O1)
    list(APPEND lowered ${t})
  endforeach()
  message(STATUS "kvconform: -O1 for ${lowered}")
endfunction()

cmake_language(DEFER CALL _kvc_orchestration_o1)
