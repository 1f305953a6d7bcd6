// Where this binary was built from. The one place an absolute path of the checkout is compiled in:
// build_paths.cpp is generated into the build tree, so it alone differs between two checkouts and
// every other translation unit hashes the same in ccache (docs/performance.md).
#pragma once

namespace kvc::paths {

// The checkout's top folder (PROJECT_SOURCE_DIR at configure time), absolute; empty in a wheel's
// binaries, which look for nothing in a checkout.
const char* source_dir();

}  // namespace kvc::paths
