// The found-case corpus: save writes one content-named file atomically and only once; load reads
// them back in order and turns a corrupt file into that entry's error, never an exception.
#include "kvconform/regressions.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "scratch_dir.h"

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

fs::path fresh(const std::string& name) {
  const fs::path d = kvc::testing::scratch_root("kvc_regressions_test_") / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

const ordered_json kPlan = {{"format", "kvconform-engine-plan-v1"},
                            {"model", "gemma2-w4"},
                            {"name", "two-tokens"},
                            {"steps", ordered_json::array({{{"op", "extend"}, {"seq", 0}, {"tokens", {60, 162}}}})}};

}  // namespace

TEST(Regressions, SaveNamesTheFileByTheHashOfItsBytes) {
  const fs::path root = fresh("hash");
  const auto saved = kvc::regressions::save(root.string(), "engine", "gemma2-w4", kPlan);
  const std::string bytes = read(saved.path);
  EXPECT_EQ(bytes, kvc::regressions::canonical_bytes(kPlan));
  EXPECT_EQ(fs::path(saved.path).parent_path(), root / "engine" / "gemma2-w4");
  EXPECT_EQ(fs::path(saved.path).filename().string(), kvc::regressions::content_hash(bytes) + ".json");
  EXPECT_EQ(saved.id, "regressions/engine/gemma2-w4/" + kvc::regressions::content_hash(bytes));
  EXPECT_EQ(kvc::regressions::content_hash(bytes).size(), 16u);
  EXPECT_FALSE(saved.existed);
}

TEST(Regressions, AScenarioFileIsNamedByItsHashInsideToo) {
  const fs::path root = fresh("scenario");
  const ordered_json scenario = {{"name", "plugin_x_kernel_0123"}, {"description", "found"}, {"cache", "dynamic"}};
  const auto saved = kvc::regressions::save(root.string(), "plugin", "kvc_ggml", scenario);
  const std::string stem = fs::path(saved.path).stem().string();
  const auto written = ordered_json::parse(read(saved.path));
  EXPECT_EQ(written["name"], stem);  // cases/schema.json: the name is the file stem
  ordered_json blank = scenario;
  blank["name"] = "";
  EXPECT_EQ(stem, kvc::regressions::content_hash(kvc::regressions::canonical_bytes(blank)));
  EXPECT_EQ(written["description"], "found");
  // The same scenario under another name is the same case: one file.
  ordered_json renamed = scenario;
  renamed["name"] = "another";
  EXPECT_TRUE(kvc::regressions::save(root.string(), "plugin", "kvc_ggml", renamed).existed);
}

TEST(Regressions, TheSameCaseSavedTwiceIsOneFileAndAnotherCaseIsAnother) {
  const fs::path root = fresh("idempotent");
  const auto a = kvc::regressions::save(root.string(), "engine", "gemma2-w4", kPlan);
  const auto b = kvc::regressions::save(root.string(), "engine", "gemma2-w4", kPlan);
  EXPECT_EQ(a.path, b.path);
  EXPECT_TRUE(b.existed);
  ordered_json other = kPlan;
  other["steps"][0]["tokens"] = {60, 163};
  const auto c = kvc::regressions::save(root.string(), "engine", "gemma2-w4", other);
  EXPECT_NE(c.path, a.path);
  // Atomic: the folder holds the two cases and no temporary file beside them.
  EXPECT_EQ(names_in(root / "engine" / "gemma2-w4").size(), 2u);
}

TEST(Regressions, AFileUnderItsHashWithOtherBytesIsAnErrorNotOverwritten) {
  const fs::path root = fresh("collision");
  const auto a = kvc::regressions::save(root.string(), "engine", "gemma2-w4", kPlan);
  std::ofstream(a.path) << "{\"edited\": true}\n";
  EXPECT_THROW(kvc::regressions::save(root.string(), "engine", "gemma2-w4", kPlan), std::runtime_error);
  EXPECT_EQ(read(a.path), "{\"edited\": true}\n");
}

TEST(Regressions, SaveRefusesBadSuiteAndTargetNames) {
  const fs::path root = fresh("names");
  for (const char* suite : {"", "engines", "../engine", "golden"})
    EXPECT_THROW(kvc::regressions::save(root.string(), suite, "m", kPlan), std::invalid_argument) << suite;
  for (const char* target : {"", "..", ".hidden", "a/b", "../../etc", "a b", "x\n"})
    EXPECT_THROW(kvc::regressions::save(root.string(), "plugin", target, kPlan), std::invalid_argument) << target;
  EXPECT_TRUE(names_in(root).empty());  // nothing written for a refused name
  EXPECT_NO_THROW(kvc::regressions::save(root.string(), "plugin", "kvc_ggml-0.3.36", kPlan));
}

TEST(Regressions, ANameBecomesAFolderNameKeepingWhatAFolderNameMayHold) {
  EXPECT_EQ(kvc::regressions::target_name("4.57.6"), "4.57.6");
  EXPECT_EQ(kvc::regressions::target_name("llama.cpp/kv=q8_0"), "llama.cpp_kv_q8_0");
  EXPECT_EQ(kvc::regressions::target_name(".hidden"), "_hidden");
  EXPECT_EQ(kvc::regressions::target_name(""), "_");
  EXPECT_NO_THROW(kvc::regressions::check_names("plugin", kvc::regressions::target_name("a b/c")));
}

TEST(Regressions, AFolderThatCannotBeWrittenIsAnErrorNamingIt) {
  if (::geteuid() == 0) {
    // root writes through permissions: a file where the folder should be blocks it instead.
    const fs::path root = fresh("blocked");
    std::ofstream(root / "engine") << "not a folder";
    try {
      kvc::regressions::save(root.string(), "engine", "m", kPlan);
      FAIL() << "saved into a file";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find((root / "engine").string()), std::string::npos) << e.what();
    }
    return;
  }
  const fs::path root = fresh("readonly");
  fs::permissions(root, fs::perms::owner_read | fs::perms::owner_exec);
  EXPECT_THROW(kvc::regressions::save(root.string(), "engine", "m", kPlan), std::runtime_error);
  fs::permissions(root, fs::perms::owner_all);
}

TEST(Regressions, LoadListsEveryTargetInSortedOrder) {
  const fs::path root = fresh("load");
  ordered_json second = kPlan;
  second["name"] = "second";
  const auto b = kvc::regressions::save(root.string(), "engine", "mistral-w5", kPlan);
  const auto a1 = kvc::regressions::save(root.string(), "engine", "gemma2-w4", kPlan);
  const auto a2 = kvc::regressions::save(root.string(), "engine", "gemma2-w4", second);
  std::ofstream(root / "engine" / "gemma2-w4" / "notes.txt") << "not a case";
  const auto all = kvc::regressions::load(root.string(), "engine");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].target, "gemma2-w4");
  EXPECT_LT(all[0].hash, all[1].hash);
  EXPECT_EQ(all[2].path, b.path);
  for (const auto& e : all) EXPECT_TRUE(e.error.empty()) << e.error;
  EXPECT_EQ(all[2].doc, kPlan);
  const auto one = kvc::regressions::load(root.string(), "engine", "gemma2-w4");
  ASSERT_EQ(one.size(), 2u);
  EXPECT_TRUE(one[0].path == a1.path || one[0].path == a2.path);
  EXPECT_TRUE(kvc::regressions::load(root.string(), "plugin").empty());  // no folder: no entries
  EXPECT_TRUE(kvc::regressions::load((root / "missing").string(), "engine").empty());
}

TEST(Regressions, ACorruptFileIsThatEntrysErrorNotAnException) {
  const fs::path root = fresh("corrupt");
  fs::create_directories(root / "plugin" / "kvc_ggml");
  std::ofstream(root / "plugin" / "kvc_ggml" / "0000000000000000.json") << "{\"name\": ";
  std::vector<kvc::regressions::Entry> entries;
  ASSERT_NO_THROW(entries = kvc::regressions::load(root.string(), "plugin"));
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_NE(entries[0].error.find("not JSON"), std::string::npos) << entries[0].error;
  EXPECT_EQ(entries[0].id(), "regressions/plugin/kvc_ggml/0000000000000000");
}
