// The release table (behaviours_for_release) against golden/behaviours.json, the record the golden
// sweep measured by running every release (golden/dump.py), and the JSON record's reader.
#include "kvconform/behaviours.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "build_paths.h"

namespace kvc {
namespace {

using nlohmann::json;

// Every release of the sweep whose record differs from the table, with the differing keys.
std::vector<std::string> disagreements(const json& sweep) {
  const json& releases = sweep.contains("releases") ? sweep.at("releases") : sweep;
  std::vector<std::string> out;
  for (const auto& [release, record] : releases.items()) {
    if (!record.is_object()) continue;  // metadata beside the releases
    json table;
    try {
      table = to_json(behaviours_for_release(release));
    } catch (const std::invalid_argument& e) {
      out.push_back(release + ": " + e.what());
      continue;
    }
    for (const std::string& k : differing_keys(table, record)) out.push_back(release + ": " + k + " (table vs measured)");
  }
  return out;
}

json sweep_file() {
  const std::filesystem::path path = std::filesystem::path(kvc::paths::source_dir()) / "golden" / "behaviours.json";
  if (!std::filesystem::exists(path)) return nullptr;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

TEST(Behaviours, TableAgreesWithTheGoldenSweep) {
  const json sweep = sweep_file();
  ASSERT_FALSE(sweep.is_null()) << "golden/behaviours.json is missing (python3 golden/timeline.py --write)";
  size_t releases = 0;
  for (const auto& item : (sweep.contains("releases") ? sweep.at("releases") : sweep).items())
    releases += item.value().is_object();
  EXPECT_GT(releases, 0u);
  const std::vector<std::string> bad = disagreements(sweep);
  std::string all;
  for (const std::string& b : bad) all += "\n  " + b;
  EXPECT_TRUE(bad.empty()) << bad.size() << " disagreements between behaviours_for_release and golden/behaviours.json:" << all;
}

// TableAgreesWithTheGoldenSweep compares every pinned release: each golden/requirements-X.txt has X in the sweep's
// record (timeline.py --releases X --write merges it), so a newly pinned release cannot pass by absence.
TEST(Behaviours, SweepHasEveryPinnedRelease) {
  const json sweep = sweep_file();
  ASSERT_FALSE(sweep.is_null()) << "golden/behaviours.json is missing (python3 golden/timeline.py --write)";
  const json& releases = sweep.contains("releases") ? sweep.at("releases") : sweep;
  const std::filesystem::path golden = std::filesystem::path(kvc::paths::source_dir()) / "golden";
  size_t pinned = 0;
  for (const auto& e : std::filesystem::directory_iterator(golden)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("requirements-", 0) != 0 || e.path().extension() != ".txt") continue;
    const std::string release = name.substr(13, name.size() - 13 - 4);
    ++pinned;
    EXPECT_TRUE(releases.contains(release) && releases.at(release).is_object())
        << "golden/" << name << " pins transformers " << release << ", which golden/behaviours.json does not record "
        << "(python3 golden/timeline.py --releases " << release << " --write)";
  }
  EXPECT_GT(pinned, 0u);
}

// TableAgreesWithTheGoldenSweep can fail: one tampered entry is reported with its release and key.
TEST(Behaviours, TamperedSweepEntryIsReported) {
  json sweep = {{"5.14.0", to_json(behaviours_for_release("5.14.0"))}, {"4.57.6", to_json(behaviours_for_release("4.57.6"))}};
  EXPECT_TRUE(disagreements(sweep).empty());
  sweep["5.14.0"]["sdpa_skip"] = "not_compileable";
  const std::vector<std::string> bad = disagreements(sweep);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0], "5.14.0: sdpa_skip: \"not_compileable_decode\" vs \"not_compileable\" (table vs measured)");
  sweep["4.57.6"]["new_behaviour"] = true;  // measured upstream, unknown to the C++ side
  EXPECT_EQ(disagreements(sweep).size(), 2u);
}

// Boundaries read in the releases' own sources (cache_utils.py, masking_utils.py).
TEST(Behaviours, ReleaseBoundaries) {
  EXPECT_EQ(behaviours_for_release("4.56.2").sliding_layer, SlidingLayer::PreMerge);
  EXPECT_EQ(behaviours_for_release("4.57.1").sliding_layer, SlidingLayer::Merged);
  EXPECT_EQ(behaviours_for_release("5.3.0").cache_api, CacheApi::CachePosition);
  EXPECT_EQ(behaviours_for_release("5.3.0").static_seq_length, StaticSeqLength::NonzeroRows);
  EXPECT_EQ(behaviours_for_release("5.4.0").cache_api, CacheApi::QueryLength);
  EXPECT_EQ(behaviours_for_release("5.4.0").static_seq_length, StaticSeqLength::Cumulative);
  EXPECT_EQ(behaviours_for_release("5.13.1").sdpa_skip, SdpaSkip::NotCompileable);
  EXPECT_FALSE(behaviours_for_release("5.13.1").sdpa_skip_empty_cache);
  EXPECT_EQ(behaviours_for_release("5.14.0").sdpa_skip, SdpaSkip::NotCompileableDecode);
  EXPECT_TRUE(behaviours_for_release("5.14.0").sdpa_skip_empty_cache);
  // The layer API (behaviours.h, LayerApi): read from each release's cache_utils.py.
  EXPECT_EQ(behaviours_for_release("4.56.2").layer_api, LayerApi::MaxLength);
  EXPECT_EQ(behaviours_for_release("5.13.1").layer_api, LayerApi::MaxLength);
  EXPECT_EQ(behaviours_for_release("5.14.0").layer_api, LayerApi::Unmodelled);
  EXPECT_EQ(behaviours_for_release("5.23.0").layer_api, LayerApi::Unmodelled);
  EXPECT_EQ(behaviours_for_release("5.24.0").layer_api, LayerApi::TokensToRemove);
}

TEST(Behaviours, NewerThanTheTableGetsTheNewestRow) {
  EXPECT_EQ(behaviours_for_release("99.1.0"), release_table().back().behaviours);
  EXPECT_EQ(Behaviours{}, release_table().back().behaviours);  // the default is the newest row
  EXPECT_EQ(behaviours_for_release("5.0.0rc1"), behaviours_for_release("5.0.0"));
  EXPECT_EQ(behaviours_for_release("5"), behaviours_for_release("5.0.0"));
}

TEST(Behaviours, RejectsWhatIsNotAKnownRelease) {
  EXPECT_THROW(behaviours_for_release("4.55.4"), std::invalid_argument);
  EXPECT_THROW(behaviours_for_release("latest"), std::invalid_argument);
  EXPECT_THROW(behaviours_for_release(""), std::invalid_argument);
}

TEST(Behaviours, JsonRecordRoundTripsAndNamesBadKeys) {
  // The record holds every behaviour but the SDPA GQA path (table only, SdpaGqaPath).
  for (const ReleaseRow& row : release_table())
    EXPECT_EQ(to_json(behaviours_from_json(to_json(row.behaviours))), to_json(row.behaviours));
  EXPECT_EQ(to_json(behaviours_for_release("4.56.0")),
            json::parse(R"({"cache_api": "cache_position", "sliding_layer": "pre_merge", "sdpa_skip": "not_compileable",
                            "sdpa_skip_empty_cache": false, "static_seq_length": "nonzero_rows"})"));
  json record = to_json(Behaviours{});
  record.erase("sdpa_skip");
  try {
    behaviours_from_json(record);
    FAIL() << "a missing key was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sdpa_skip"), std::string::npos) << e.what();
  }
  record = to_json(Behaviours{});
  record["cache_api"] = "positions";
  EXPECT_THROW(behaviours_from_json(record), std::invalid_argument);
  record = to_json(Behaviours{});
  record["kv_layout"] = "bhsd";
  try {
    behaviours_from_json(record);
    FAIL() << "an unknown behaviour was ignored";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("kv_layout"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvc
