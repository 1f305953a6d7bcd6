// Small helpers shared by the subcommands (no LibTorch).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "kvcgen/campaign.h"

namespace kvc::cli {

inline constexpr const char* kToolVersion = "kvconform 0.1.0";

// The command line as given, shell-quoted where needed (RunSummary::command). main() records it.
void set_command_line(int argc, char** argv);
const std::string& command_line();
std::string shell_quote(const std::string& word);

// A slice of the fuzz rounds: this process runs the rounds r with r % count == index.
struct Shard {
  long long index = 0, count = 1;
};
// "i/n" with 0 <= i < n; throws std::invalid_argument.
Shard parse_shard(const std::string& text);
// The --shard value, else GTEST_SHARD_INDEX / GTEST_TOTAL_SHARDS (both set), else 0/1.
Shard resolve_shard(const std::string& flag);

// The scenario file (cases/schema.json) of a shrunk property counterexample, named by a hash of
// what it runs (fuzz_command.cpp); `message` is the failure's last line.
nlohmann::ordered_json case_json(const campaign::Counterexample& c, campaign::Property property, Mutation mutation,
                                 uint64_t seed, const std::string& message);

// Properties whose name matches the regular expression; throws std::invalid_argument if it is
// malformed or matches none.
std::vector<campaign::Property> select_properties(const std::string& regex);

}  // namespace kvc::cli
