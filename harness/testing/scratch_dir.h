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

// One prefix per test binary: the first call fixes the folder and registers its removal.
inline std::filesystem::path scratch_root(const std::string& prefix) {
  struct RemoveWhenGreen : ::testing::Environment {
    explicit RemoveWhenGreen(std::filesystem::path d) : dir(std::move(d)) {}
    void TearDown() override {
      std::error_code ignored;
      if (::testing::UnitTest::GetInstance()->Passed()) std::filesystem::remove_all(dir, ignored);
    }
    std::filesystem::path dir;
  };
  static const std::filesystem::path dir = [&] {
    std::filesystem::path d = std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()));
    ::testing::AddGlobalTestEnvironment(new RemoveWhenGreen(d));
    return d;
  }();
  return dir;
}

}  // namespace kvc::testing
