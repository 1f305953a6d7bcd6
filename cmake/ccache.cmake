# ccache when it is installed (never required), for the project and the out-of-tree builds inside the
# checkout (the llama.cpp workers). CMake's precompiled headers are cached only with these
# sloppiness settings (ccache manual, "Precompiled headers"); the base directory, the checkout's
# root, makes paths relative, so that a fresh clone elsewhere (CI) hits what an earlier one compiled.
# Not depend mode, though it saves the preprocessor run on a miss (a clean build through an empty
# cache: 340 -> 319 s of CPU): a source whose text names the checkout's absolute path (the unity
# batches, the generated target-file lists) then misses in every fresh clone, where the preprocessor
# mode's second lookup hits. A warm CI clone's build took 50 s instead of 28. Not direct mode either:
# it hashes every header a source includes (ATen's thousands) to write its manifest on a miss, and
# a hit after preprocessing costs no more here (a clean build through an empty cache 303 -> 293 s of
# CPU, a fresh clone's build after it 36.5 and 37.0 s, the same hour).
option(KVC_CCACHE "Compile through ccache when it is installed" ON)
if(KVC_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(KVC_CCACHE_PROGRAM ccache)
  if(KVC_CCACHE_PROGRAM)
    get_filename_component(_kvc_ccache_base "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
    set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env
        "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime" CCACHE_DIRECTMODE=false
        "CCACHE_BASEDIR=${_kvc_ccache_base}" ${KVC_CCACHE_PROGRAM})
  endif()
endif()
# A unity batch includes its sources by absolute path, so gtest's __FILE__ (every EXPECT) expands to
# the checkout's path and the batch missed ccache in every fresh clone (CI's): the unity test targets
# take this flag, which makes __FILE__ relative to the checkout (and ccache, 4.7.5 here, then hits in
# another clone). kvc_core_test's, kvc_reference_test's and kvc_cli's batch with the build id were
# three of the five misses of a fresh clone's build.
get_filename_component(_kvc_source_root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(KVC_RELATIVE_FILE_MACRO "-fmacro-prefix-map=${_kvc_source_root}=.")
