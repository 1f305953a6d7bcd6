# cmake --install: the kvconform CLI, the plugin headers and a CMake package, so an out-of-tree
# project writes find_package(kvconform) and kvconform_add_plugin(name src.cpp)
# (examples/out_of_tree_plugin). The CLI's install rule is in cli/CMakeLists.txt.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(FILES ${PROJECT_SOURCE_DIR}/harness/include/kvconform/plugin_abi.h
              ${PROJECT_SOURCE_DIR}/plugins/common/kvc_plugin_util.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvconform)
install(TARGETS kvc_plugin_abi EXPORT kvconformTargets)
install(EXPORT kvconformTargets NAMESPACE kvconform:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvconform)

set(_kvc_config_dir ${CMAKE_CURRENT_BINARY_DIR}/kvconform-package)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kvconformConfig.cmake.in ${_kvc_config_dir}/kvconformConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvconform
                              PATH_VARS CMAKE_INSTALL_BINDIR CMAKE_INSTALL_INCLUDEDIR)
# The plugin ABI carries its own version (KVC_PLUGIN_ABI_VERSION); within 0.x a minor bump may change it.
write_basic_package_version_file(${_kvc_config_dir}/kvconformConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${_kvc_config_dir}/kvconformConfig.cmake ${_kvc_config_dir}/kvconformConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/kvconformPlugin.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kvconform)
