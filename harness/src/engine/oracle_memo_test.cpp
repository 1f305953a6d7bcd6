// The row memo's key (oracle_memo.h): the same inputs give the same key, and each input that changes
// the rows changes it: every field of OracleOptions, the model's digest, the oracle's type, each step.
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "kvconform/engine/oracle_memo.h"

namespace kvc::engine {
namespace {

TEST(OracleMemo, EachFieldOfTheOptionsChangesTheKey) {
  // One change per field of OracleOptions, each from its default.
  const std::vector<std::pair<const char*, std::function<void(OracleOptions&)>>> changes = {
      {"windows",
       [](OracleOptions& o) {
         o.windows = {4, 0};
       }},
      {"chunks",
       [](OracleOptions& o) {
         o.chunks = {0, 8};
       }},
      {"kv_half", [](OracleOptions& o) { o.kv_half = true; }},
      {"q_half", [](OracleOptions& o) { o.q_half = true; }},
      {"gelu_half", [](OracleOptions& o) { o.gelu_half = true; }},
      {"k_block", [](OracleOptions& o) { o.k_block = KvBlock::Q8_0; }},
      {"v_block", [](OracleOptions& o) { o.v_block = KvBlock::Q8_0; }},
      {"q_block", [](OracleOptions& o) { o.q_block = KvBlock::Q8_0; }},
      {"kv_bf16", [](OracleOptions& o) { o.kv_bf16 = true; }},
      {"chunk_shift", [](OracleOptions& o) { o.chunk_shift = 1; }},
      {"window_delta_position", [](OracleOptions& o) { o.window_delta_position = 5; }},
      {"window_delta", [](OracleOptions& o) { o.window_delta = 1; }},
      {"reach_delta", [](OracleOptions& o) { o.reach_delta = 1; }},
      {"causal", [](OracleOptions& o) { o.causal = true; }},
  };
  const std::string plain = oracle_rows_key("model", "float64", {});
  EXPECT_EQ(oracle_rows_key("model", "float64", {}), plain);
  std::set<std::string> keys = {plain};
  for (const auto& [field, change] : changes) {
    OracleOptions o;
    change(o);
    const std::string key = oracle_rows_key("model", "float64", o);
    EXPECT_EQ(oracle_rows_key("model", "float64", o), key) << field;
    EXPECT_TRUE(keys.insert(key).second) << field << " leaves the key of another options";
  }
  EXPECT_NE(oracle_rows_key("model2", "float64", {}), plain);
  EXPECT_NE(oracle_rows_key("model", "float32", {}), plain);
  const std::string one = next_oracle_rows_key(plain, "{\"op\":\"extend\",\"tokens\":[1]}");
  EXPECT_NE(one, plain);
  EXPECT_NE(next_oracle_rows_key(plain, "{\"op\":\"extend\",\"tokens\":[2]}"), one);
  EXPECT_EQ(next_oracle_rows_key(plain, "{\"op\":\"extend\",\"tokens\":[1]}"), one);
}

}  // namespace
}  // namespace kvc::engine
