// A test process's scratch folder under the system temp folder, <prefix><pid>. It is removed when
// every test of the process passed (ctest starts thousands of test processes); a failure keeps it,
// to look at. Header-only, for the test binaries that need no LibTorch.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace kvc::testing {

inline std::filesystem::path scratch_root(const std::string& prefix) {
  static const bool registered = [&] {
    struct RemoveWhenGreen : ::testing::Environment {
      explicit RemoveWhenGreen(std::filesystem::path d) : dir(std::move(d)) {}
      void TearDown() override {
        std::error_code ignored;
        if (::testing::UnitTest::GetInstance()->Passed()) std::filesystem::remove_all(dir, ignored);
      }
      std::filesystem::path dir;
    };
    ::testing::AddGlobalTestEnvironment(
        new RemoveWhenGreen(std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()))));
    return true;
  }();
  (void)registered;
  return std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()));
}

}  // namespace kvc::testing
