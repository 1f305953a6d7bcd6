// The built-in attention backends against the float64 oracle, the tolerance policy's edges, and
// the windowed kernel's faults (each must be caught by the built-in suite).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <iostream>
#include <map>

#include "build_paths.h"
#include "kvconform/attention.h"
#include "kvconform/backends.h"
#include "kvconform/regex.h"
#include "kvconform/tensors.h"

namespace kvc::backends {
// The ctest name of a WindowedFault case (gtest_discover_tests prints the parameter): the fault's name,
// where gtest's default printed the enum's bytes.
void PrintTo(Fault f, std::ostream* os) {
  switch (f) {
    case Fault::WindowOffByOne: *os << "WindowOffByOne"; return;
    case Fault::FirstRowPadding: *os << "FirstRowPadding"; return;
    case Fault::IgnoreKvOffset: *os << "IgnoreKvOffset"; return;
    default: *os << "fault" << static_cast<int>(f);
  }
}
namespace {

TEST(BackendSuite, EveryBuiltinBackendPassesOnCpu) {
  const auto results = run_suite({});
  ASSERT_FALSE(results.empty());
  std::map<std::string, int> per_backend;
  for (const auto& r : results) {
    ++per_backend[r.backend];
    // eager in float64 with left padding: NaN in fully masked rows, as transformers itself does.
    const auto expected = known_deviation(r.backend, parse_dtype(r.dtype)) && r.name.find("left_padding") != std::string::npos
                              ? report::Status::Deviation
                              : report::Status::Pass;
    EXPECT_EQ(r.status, expected) << r.backend << " " << r.name << " " << r.dtype << ": " << r.message;
    RecordProperty(r.backend + "/" + r.name + "/" + r.dtype, r.detail);
    if (std::getenv("KVC_PRINT_ERRORS")) std::cout << r.backend << " " << r.dtype << " " << r.name << ": " << r.detail << "\n";
  }
  EXPECT_EQ(per_backend.size(), names().size());
}

// Judging goes on after a deviation: eager float64 with left padding deviates at step 0 (NaN in a
// fully masked row, as transformers does), and a mutant reference that misplaces kv_offset once the
// layer is full must still fail that case at a later step.
TEST(BackendSuite, EveryStepIsJudgedAfterADeviation) {
  SuiteOptions o;
  o.backends = {"eager"};
  o.mutation = Mutation::KvOffsetTooSmall;
  bool seen = false;
  for (const auto& r : run_suite(o)) {
    if (r.name != "sliding_left_padding_batch/static" || r.dtype != "float64") continue;
    seen = true;
    EXPECT_EQ(r.status, report::Status::Fail) << r.message;
    EXPECT_NE(r.message.find("step 1"), std::string::npos) << r.message;
    EXPECT_NE(r.detail.find("step 0 (7 tokens after 0): deviation"), std::string::npos) << r.detail;
  }
  EXPECT_TRUE(seen);
}

TEST(BackendSuite, CudaIsSkippedWhereUnavailable) {
  if (at::hasCUDA()) GTEST_SKIP() << "CUDA is available: the suite runs for real (see BackendSuite.Cuda*)";
  SuiteOptions o;
  o.device = "cuda";
  o.backends = {"windowed"};
  for (const auto& r : run_suite(o)) {
    EXPECT_EQ(r.status, report::Status::Skipped) << r.name;
    EXPECT_NE(r.message.find("CUDA"), std::string::npos);
  }
}

TEST(BackendSuite, CudaBackendsPassWhereAvailable) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA";
  SuiteOptions o;
  o.device = "cuda";
  // The same expectations as on the CPU: eager float64 with left padding reproduces transformers' NaN rows.
  for (const auto& r : run_suite(o)) {
    const auto expected = known_deviation(r.backend, parse_dtype(r.dtype)) && r.name.find("left_padding") != std::string::npos
                              ? report::Status::Deviation
                              : report::Status::Pass;
    EXPECT_EQ(r.status, expected) << r.backend << " " << r.name << " " << r.dtype << ": " << r.message;
  }
}

TEST(BackendSuite, RejectsUnknownNames) {
  EXPECT_THROW(make("flash"), std::invalid_argument);
  SuiteOptions o;
  o.device = "tpu";
  EXPECT_THROW(run_suite(o), std::invalid_argument);
}

// Every fault of the windowed kernel makes some built-in pattern fail against the oracle.
class WindowedFault : public ::testing::TestWithParam<Fault> {};
TEST_P(WindowedFault, IsCaughtByTheOracle) {
  // run_suite builds its backends by name; drive the faulty kernel through the same steps by hand.
  int failures = 0;
  for (int64_t W : {2, 3, 4}) {
    MaskRequest m;
    m.type = LayerType::Sliding;
    m.window = W;
    m.batch = 2;
    m.left_padding = std::vector<int64_t>{0, 2};
    const int64_t n = 7;
    for (int64_t i = 0; i < n; ++i) m.query_positions.push_back(3 + i);
    m.sizes = {n + 3, 0};
    m.seen_after = n + 3;
    if (GetParam() == Fault::IgnoreKvOffset) {  // keys [2, 2 + n + 1)
      m.sizes = {n + 1, 2};
    }
    const int64_t kv = m.sizes.kv_length;
    const at::Tensor q = at::randn({2, 2, n, 4}, at::kDouble), k = at::randn({2, 1, kv, 4}, at::kDouble);
    const at::Tensor v = at::randn({2, 1, kv, 4}, at::kDouble);
    const at::Tensor mask = masks::boolean_mask(m);
    const at::Tensor exact = attention::exact(q, k, v, mask);
    const at::Tensor good = windowed(q, k, v, m.query_positions, m.sizes.kv_offset, kernel_window(m));
    const at::Tensor bad = windowed(q, k, v, m.query_positions, m.sizes.kv_offset, kernel_window(m), GetParam());
    EXPECT_TRUE(at::allclose(good, exact, 0, 1e-12)) << "W=" << W;
    if (!at::allclose(bad, exact, 0, 1e-6)) ++failures;
  }
  EXPECT_GT(failures, 0);
}
INSTANTIATE_TEST_SUITE_P(Faults, WindowedFault,
                         ::testing::Values(Fault::WindowOffByOne, Fault::FirstRowPadding, Fault::IgnoreKvOffset));

// The kernel mutants (mutants.h, Mutation::Kernel*): `windowed` computing wrongly FAILs the numerics
// case named for its bug class (numeric_scenarios), while every backend passes those cases unmutated
// (EveryBuiltinBackendPassesOnCpu runs them too).
struct KernelCatch {
  Mutation mutation;
  const char* scenario;
  DType dtype;
  const char* fragment;  // in the FAIL message
};
// The parameter's printed form is the ctest name's suffix (gtest_discover_tests): readable and the same in
// every build, where gtest's default printed the struct's raw bytes (a pointer among them).
void PrintTo(const KernelCatch& c, std::ostream* os) {
  *os << to_string(c.mutation) << "/" << c.scenario << "/" << to_string(c.dtype);
}
class KernelMutant : public ::testing::TestWithParam<KernelCatch> {};
TEST_P(KernelMutant, FailsItsNamedNumericsCase) {
  const KernelCatch c = GetParam();
  SuiteOptions o;
  o.backends = {"windowed"};
  o.mutation = c.mutation;
  const std::string id = std::string("backend/") + c.scenario + "/static/windowed/" + to_string(c.dtype);
  o.select = [&](const std::string& i) { return i == id; };
  const auto results = run_suite(o);
  ASSERT_EQ(results.size(), 1u) << id;
  const report::CaseResult& r = results[0];
  EXPECT_EQ(r.status, report::Status::Fail) << id << ": " << r.message << "\n" << r.detail;
  EXPECT_NE(r.message.find(c.fragment), std::string::npos) << r.message;
  std::cout << "  " << to_string(c.mutation) << ": " << r.id << ": " << r.message << "\n";
}
INSTANTIATE_TEST_SUITE_P(
    Numerics, KernelMutant,
    ::testing::Values(KernelCatch{Mutation::KernelSoftmaxInInputDtype, "long_keys_4096", DType::Float16, "max error"},
                      KernelCatch{Mutation::KernelSoftmaxInInputDtype, "long_keys_4096", DType::BFloat16, "max error"},
                      KernelCatch{Mutation::KernelF16Accumulation, "long_keys_4096", DType::Float16, "max error"},
                      KernelCatch{Mutation::KernelF16Accumulation, "long_keys_4096", DType::BFloat16, "max error"},
                      KernelCatch{Mutation::KernelNoMaxSubtraction, "large_logits", DType::Float32, "NaN"},
                      KernelCatch{Mutation::KernelNoMaxSubtraction, "large_logits", DType::Float16, "NaN"}));

// Without the numerics cases, the softmax in float16 and 16-bit accumulation pass the small step
// patterns (windows <= 10, k/128 inputs): why the numerics cases exist.
TEST(KernelMutant, SmallPatternsAloneMissTheSixteenBitMutants) {
  for (Mutation m : {Mutation::KernelSoftmaxInInputDtype, Mutation::KernelF16Accumulation}) {
    SuiteOptions o;
    o.backends = {"windowed"};
    o.mutation = m;
    o.numerics = false;
    o.select = [](const std::string& id) { return id.find("/float16") != std::string::npos; };
    for (const auto& r : run_suite(o)) EXPECT_EQ(r.status, report::Status::Pass) << to_string(m) << " " << r.name;
  }
}

// The stored-state opt-in: windowed_cache answers from a cache of its own, and the suite holds that
// cache to the reference layer's stored rows after each step. Its stale-rows mutant still attends
// right (the stale rows are past what it has written), so only the stored-state check sees it: on
// the one pattern that resets and then writes fewer tokens than a static layer holds.
TEST(StoredState, AStaleRowWithRightOutputsIsCaughtByTheStoredStateCheck) {
  SuiteOptions o;
  o.backends = {"windowed_cache"};
  o.numerics = false;
  o.mutation = Mutation::StaleRowsAfterReset;
  // Every pattern in float32 (only the reset one fails) and the reset pattern in every dtype.
  o.select = [](const std::string& id) {
    return id.find("/float32") != std::string::npos || id.find("/reset_and_restart/") != std::string::npos;
  };
  int failed = 0;
  for (const auto& r : run_suite(o)) {
    const bool caught = r.name == "reset_and_restart/static";
    EXPECT_EQ(r.status, caught ? report::Status::Fail : report::Status::Pass) << r.id << ": " << r.message;
    if (!caught) continue;
    ++failed;
    // The attention was judged first and passed: the message is the stored state's.
    EXPECT_NE(r.message.find("step 3 (3 tokens after 0): stored state: row 3's keys differ from the reference layer's "
                             "(which is unwritten, zero)"),
              std::string::npos)
        << r.message;
    std::cout << "  " << r.id << ": " << r.message << "\n";
  }
  EXPECT_EQ(failed, 4);  // every dtype
}

TEST(Judge, NaNWhereTheOracleIsFiniteFails) {
  const at::Tensor oracle = at::zeros({1, 1, 2, 2}, at::kDouble);
  at::Tensor out = at::zeros({1, 1, 2, 2}, at::kFloat);
  out[0][0][1][1] = std::numeric_limits<float>::quiet_NaN();
  const at::Tensor sees = at::tensor(std::vector<uint8_t>{1, 0}).to(at::kBool).view({1, 1, 2, 1});
  const Verdict v = judge(out, oracle, oracle, sees, DType::Float32);  // the NaN is in a fully masked row
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.problem.find("NaN at [b=0,h=0,q=1,d=1]"), std::string::npos) << v.problem;
}

TEST(Judge, BoundIsTheLargerOfFloorAndFactorTimesReferenceError) {
  const at::Tensor oracle = at::zeros({1, 1, 1, 1}, at::kDouble);
  const at::Tensor sees = at::ones({1, 1, 1, 1}, at::kBool);
  const ReferenceRule p = reference_rule(DType::Float16);
  const at::Tensor ref = at::full({1, 1, 1, 1}, 10 * p.floor, at::kDouble);
  EXPECT_TRUE(judge(at::full({1, 1, 1, 1}, p.floor, at::kDouble), oracle, oracle, sees, DType::Float16).ok);
  EXPECT_FALSE(judge(at::full({1, 1, 1, 1}, 2 * p.floor, at::kDouble), oracle, oracle, sees, DType::Float16).ok);
  EXPECT_TRUE(judge(at::full({1, 1, 1, 1}, p.factor * 10 * p.floor, at::kDouble), ref, oracle, sees, DType::Float16).ok);
  EXPECT_FALSE(judge(at::full({1, 1, 1, 1}, p.factor * 11 * p.floor, at::kDouble), ref, oracle, sees, DType::Float16).ok);
  // A fully masked row is not compared, only required finite.
  EXPECT_TRUE(
      judge(at::full({1, 1, 1, 1}, 5.0, at::kDouble), oracle, oracle, at::zeros({1, 1, 1, 1}, at::kBool), DType::Float16).ok);
}

// A float64 kernel that secretly computes in float32 must fail the float64 policy, while eager
// (transformers' float32 softmax, judged as float32) passes.
TEST(Judge, Float64KernelComputingInFloat32IsCaught) {
  at::manual_seed(7);
  const at::Tensor q = (at::randint(-128, 129, {1, 2, 3, 8}, at::kDouble) / 128),
                   k = (at::randint(-128, 129, {1, 2, 5, 8}, at::kDouble) / 128);
  const at::Tensor v = at::randint(-128, 129, {1, 2, 5, 8}, at::kDouble) / 128;
  const at::Tensor mask = at::ones({1, 1, 3, 5}, at::kBool);
  const at::Tensor sees = at::ones({1, 1, 3, 1}, at::kBool);
  const at::Tensor oracle = math_reference(q, k, v, mask);
  const at::Tensor in_float32 = math_reference(q.to(at::kFloat), k.to(at::kFloat), v.to(at::kFloat), mask).to(at::kDouble);
  EXPECT_FALSE(judge(in_float32, 0.0, oracle, sees, DType::Float64).ok);
  EXPECT_TRUE(judge(in_float32, 0.0, oracle, sees, make("eager")->judged_as(DType::Float64)).ok);
  EXPECT_EQ(make("sdpa")->judged_as(DType::Float64), DType::Float64);
}

}  // namespace
}  // namespace kvc::backends

// A backend's name lives in one place, the registry: docs/backends.md's table must list exactly the
// registered backends, so that adding or renaming one without its documentation fails here.
TEST(BackendRegistry, DocsTableListsExactlyTheRegisteredBackends) {
  std::ifstream in(std::string(kvc::paths::source_dir()) + "/docs/backends.md");
  ASSERT_TRUE(in) << "docs/backends.md";
  std::set<std::string> documented;
  const kvc::Regex row("^\\| `([a-z_0-9]+)` \\|");
  for (std::string line; std::getline(in, line);) {
    kvc::RegexMatch m;
    if (row.search(line, m)) documented.insert(m.str(1));
  }
  const std::vector<std::string> names = kvc::backends::names();
  EXPECT_EQ(documented, std::set<std::string>(names.begin(), names.end()));
  EXPECT_THROW(kvc::backends::make("no_such_backend"), std::invalid_argument);
}
