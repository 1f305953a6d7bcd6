// `kvconform run`: the built-in property campaign, one line per property.
#include <iomanip>
#include <iostream>
#include <regex>

#include "commands.h"
#include "kvconform/campaign.h"
#include "kvconform/positions.h"

namespace kvc::cli {

namespace {
struct RunArgs {
  std::optional<uint64_t> seed;
  std::optional<int> iterations;
  std::string property = ".*";
  std::string attention, dtype, mutant = "none", reproduce;
  bool list = false, verbose = false;
};
}  // namespace

Runner add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* run = app.add_subcommand("run", "Run the conformance campaign (default: every property, fixed seed)");
  run->add_option("--seed", args->seed, "Campaign seed (default 20250917, or KVC_SEED)");
  run->add_option("--iterations", args->iterations, "RapidCheck cases per property (default 100, or KVC_ITERATIONS)")
      ->check(CLI::PositiveNumber);
  run->add_option("--property", args->property, "Regular expression over property names");
  run->add_option("--attention", args->attention, "Only sliding, chunked or full configurations");
  run->add_option("--dtype", args->dtype, "Only configurations of this dtype (float32, float16, bfloat16, float64)");
  run->add_option("--mutant", args->mutant, "Run against a deliberately wrong implementation (expect FAIL)");
  run->add_option("--reproduce", args->reproduce, "Replay a failure from its reproduce string (with --property)");
  run->add_flag("--list", args->list, "List what would run and exit");
  run->add_flag("-v,--verbose", args->verbose, "Print the largest numerical errors seen per dtype");

  return [args]() -> int {
    campaign::Options options = campaign::options_from_env();
    if (args->seed) options.seed = *args->seed;
    if (args->iterations) options.iterations = *args->iterations;
    if (!args->reproduce.empty()) options.reproduce = args->reproduce;
    if (!args->attention.empty()) options.filter.attention = parse_layer_type(args->attention);
    if (!args->dtype.empty()) options.filter.dtype = parse_dtype(args->dtype);
    options.mutation = parse_mutation(args->mutant);
    std::regex pattern;
    try {
      pattern = std::regex(args->property);
    } catch (const std::regex_error& e) {
      throw std::invalid_argument("--property '" + args->property + "' is not a valid regular expression");
    }

    std::vector<campaign::Property> selected;
    for (campaign::Property p : campaign::all_properties())
      if (std::regex_search(campaign::to_string(p), pattern)) selected.push_back(p);
    if (selected.empty()) throw std::invalid_argument("--property '" + args->property + "' matches no property");
    if (args->list) {
      for (campaign::Property p : selected) std::cout << campaign::to_string(p) << ": " << campaign::describe(p) << "\n";
      return 0;
    }

    int passed = 0, failed = 0;
    for (campaign::Property p : selected) {
      const campaign::Outcome o = campaign::run(p, options);
      std::cout << campaign::to_string(p) << "(" << o.params << "): ";
      if (o.ok) {
        ++passed;
        std::cout << "OK (" << o.cases << " cases, " << o.observations.steps << " steps)\n";
      } else {
        ++failed;
        std::cout << "FAIL after " << o.cases << " passing cases\n" << o.failure << "\n";
        if (!o.reproduce.empty())
          std::cout << "  reproduce: kvconform run --property '^" << campaign::to_string(p) << "$' --seed " << options.seed
                    << " --reproduce '" << o.reproduce << "'\n";
      }
      if (args->verbose)
        for (const auto& [key, err] : o.observations.max_error)
          std::cout << "  max error " << key << ": " << std::scientific << std::setprecision(3) << err
                    << std::defaultfloat << "\n";
      std::cout.flush();
    }
    std::cout << passed << " passed, " << failed << " failed\n";
    return failed == 0 ? 0 : 1;
  };
}

}  // namespace kvc::cli
