# ccache when it is installed (never required), for the project and the out-of-tree builds inside the
# checkout (the llama.cpp workers). CMake's precompiled headers are cached only with these
# sloppiness settings (ccache manual, "Precompiled headers"); the base directory, the checkout's
# root, makes paths relative, so that a fresh clone elsewhere (CI) hits what an earlier one compiled.
# Depend mode: on a miss ccache reads the includes from the compiler's -MD file instead of running the
# preprocessor before the compiler (a clean build through an empty cache: 340 -> 319 s of CPU).
option(KVC_CCACHE "Compile through ccache when it is installed" ON)
if(KVC_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(KVC_CCACHE_PROGRAM ccache)
  if(KVC_CCACHE_PROGRAM)
    get_filename_component(_kvc_ccache_base "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
    set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env
        "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
        "CCACHE_BASEDIR=${_kvc_ccache_base}" CCACHE_DEPEND=1 ${KVC_CCACHE_PROGRAM})
  endif()
endif()
