# kvconform_add_plugin(<name> <source>...): a kvconform plugin (docs/plugins.md) as a MODULE library
# named <name>.so (no "lib" prefix) that exports only kvc_plugin_get_api, compiled as C++17 against
# plugin_abi.h and the helper header kvc_plugin_util.h. Used in this tree (plugins/CMakeLists.txt)
# and, through find_package(kvconform), by projects built against an installed kvconform.
function(kvconform_add_plugin name)
  if(NOT ARGN)
    message(FATAL_ERROR "kvconform_add_plugin(${name}): no source files")
  endif()
  add_library(${name} MODULE ${ARGN})
  target_link_libraries(${name} PRIVATE kvconform::plugin_abi)
  target_compile_features(${name} PRIVATE cxx_std_17)
  set_target_properties(${name} PROPERTIES PREFIX "" C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden
                                           VISIBILITY_INLINES_HIDDEN ON)
endfunction()
