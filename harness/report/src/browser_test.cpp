// Opens report.html in headless Chromium and checks what a person would see. Skips when no
// Chromium is installed (scripts/setup.sh installs it with KVC_WITH_BROWSER=1).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "kvconform/report.h"
#include "sample_summary.h"

namespace kvc::report {
namespace {

namespace fs = std::filesystem;

std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}) {
    const std::string cmd = std::string("command -v ") + name + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return name;
  }
  return "";
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

class Browser : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = find_chromium();
    if (chromium_.empty()) GTEST_SKIP() << "chromium is not installed (KVC_WITH_BROWSER=1 scripts/setup.sh installs it)";
    dir_ = fs::temp_directory_path() / ("kvc_browser_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    write_reports(testing::sample_summary(), dir_.string());
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  std::string flags() const {
    // A private profile folder: no clash with another Chromium, nothing left in $HOME.
    return chromium_ + " --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run" + " --user-data-dir='" +
           (dir_ / "profile").string() + "'";
  }
  std::string chromium_;
  fs::path dir_;
};

TEST_F(Browser, DumpDomShowsTotalsAndFailureHeatmap) {
  const std::string dom =
      run("timeout 120 " + flags() + " --dump-dom 'file://" + (dir_ / "report.html").string() + "' 2>/dev/null");
  ASSERT_FALSE(dom.empty()) << "chromium printed no DOM";
  EXPECT_NE(dom.find("1 passed, 1 failed, 1 deviations, 1 skipped"), std::string::npos);
  EXPECT_NE(dom.find("id=\"totals\""), std::string::npos);
  EXPECT_NE(dom.find("class=\"heatmap\" data-mismatches=\"1\""), std::string::npos);
  EXPECT_NE(dom.find("<svg"), std::string::npos);
  EXPECT_NE(dom.find("class=\"mismatch\""), std::string::npos);
  EXPECT_NE(dom.find("--reproduce 'B8wdp5&amp;&lt;&gt;'"), std::string::npos);
}

TEST_F(Browser, ScreenshotIsWritten) {
  // KVC_SCREENSHOT=path keeps the picture for a person to look at.
  const char* keep = std::getenv("KVC_SCREENSHOT");
  const fs::path png = keep && *keep ? fs::path(keep) : dir_ / "report.png";
  fs::remove(png);
  run("timeout 120 " + flags() + " --window-size=1280,1800 --screenshot='" + png.string() + "' 'file://" +
      (dir_ / "report.html").string() + "' >/dev/null 2>&1");
  ASSERT_TRUE(fs::exists(png));
  EXPECT_GT(fs::file_size(png), 10000u);  // a blank page compresses to a few hundred bytes
}

}  // namespace
}  // namespace kvc::report
