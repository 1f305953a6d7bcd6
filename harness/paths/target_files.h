// Built files a test binary runs (other executables, plugins), by target name. Defined in a file
// that kvc_target_files() (harness/paths/CMakeLists.txt) generates for each test binary, so the
// test sources themselves carry no path of the build tree.
#pragma once

#include <string_view>

namespace kvc::paths {

// $<TARGET_FILE:target>; throws std::invalid_argument for a target the binary did not list.
const char* target_file(std::string_view target);

}  // namespace kvc::paths
