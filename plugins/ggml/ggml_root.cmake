# KVC_GGML_ROOT: the ggml install prefix fetch_build_ggml.sh makes, version read from the script so
# the two cannot drift: ${KVC_CACHE:-$HOME/.cache/kvconform}/ggml-<version>/install.
file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/fetch_build_ggml.sh _kvc_ggml_version_line REGEX "^version=")
string(REPLACE "version=" "" KVC_GGML_VERSION "${_kvc_ggml_version_line}")
if(DEFINED ENV{KVC_CACHE})
  set(_kvc_cache "$ENV{KVC_CACHE}")
else()
  set(_kvc_cache "$ENV{HOME}/.cache/kvconform")
endif()
set(KVC_GGML_ROOT "${_kvc_cache}/ggml-${KVC_GGML_VERSION}/install" CACHE PATH
    "ggml prefix made by plugins/ggml/fetch_build_ggml.sh")
