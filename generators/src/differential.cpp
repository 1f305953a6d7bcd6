#include "kvcgen/differential.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "kvconform/behaviours.h"
#include "kvconform/cases.h"
#include "kvcgen/corpus.h"
#include "kvcgen/shrink.h"
#include "kvconform/golden.h"
#include "kvconform/regressions.h"

namespace kvc::differential {

using nlohmann::json;
using nlohmann::ordered_json;

Dumper::Dumper(const std::string& python, const std::string& script) {
  int in[2], out[2];
  // Close-on-exec: with several dumpers, a child must not inherit another dumper's stdin pipe, or
  // that dumper never sees EOF and its destructor waits forever.
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("differential: cannot create pipes");
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("differential: cannot fork");
  if (pid_ == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    close(in[1]);
    close(out[0]);
    execl(python.c_str(), python.c_str(), script.c_str(), "--serve", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  to_child_ = in[1];
  from_child_ = out[0];
}

Dumper::~Dumper() {
  if (to_child_ >= 0) close(to_child_);  // EOF: the dumper's loop ends
  if (from_child_ >= 0) close(from_child_);
  if (pid_ > 0) {
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

json Dumper::dump(const ordered_json& scenario) {
  const std::string line = scenario.dump() + "\n";
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = write(to_child_, line.data() + done, line.size() - done);
    if (n <= 0) throw std::runtime_error("differential: the dumper stopped reading (did its environment start?)");
    done += static_cast<size_t>(n);
  }
  for (;;) {
    if (const size_t eol = buffer_.find('\n'); eol != std::string::npos) {
      const std::string reply = buffer_.substr(0, eol);
      buffer_.erase(0, eol + 1);
      return json::parse(reply);
    }
    char chunk[65536];
    const ssize_t n = read(from_child_, chunk, sizeof chunk);
    if (n <= 0) throw std::runtime_error("differential: the dumper exited without answering");
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

namespace {

struct Verdict {
  bool disagree = false, deviation = false;
  std::string message;
  int64_t steps = 0;
};

// The C++ side of a verdict runs one at a time: golden::check sets LibTorch's global intra-op thread
// count for its bitwise replay, and the pool's parallelism is the dumper processes anyway.
std::mutex reference_mutex;

// `release` names the reference's behaviours (behaviours_for_release); when it is the dumper's own
// release, the dumper's behaviours record must agree with the table too.
Verdict judge(Dumper& dumper, const ordered_json& scenario, const std::string& release, bool own_release, Mutation mutation) {
  const json fixture = dumper.dump(scenario);
  if (fixture.contains("invalid_case") || fixture.contains("dumper_error"))
    throw std::runtime_error("differential: the dumper rejected a generated case: " + fixture.dump().substr(0, 300));
  const std::lock_guard<std::mutex> one_at_a_time(reference_mutex);
  const Scenario c = cases::parse_case(scenario.dump(), scenario["name"].get<std::string>());
  const Behaviours behaviours = behaviours_for_release(release);
  if (own_release && fixture.contains("behaviours")) {
    const std::vector<std::string> keys = differing_keys(to_json(behaviours), fixture.at("behaviours"));
    if (!keys.empty())
      return {true, false,
              "transformers " + release + " measures behaviours that behaviours_for_release(\"" + release +
                  "\") disagrees with (table vs record): " + keys.front(),
              static_cast<int64_t>(c.steps.size())};
  }
  const report::CaseResult r = golden::check(fixture, c, behaviours, mutation);
  return {r.status == report::Status::Fail, r.status == report::Status::Deviation, r.message,
          static_cast<int64_t>(c.steps.size())};
}

// Simpler variants of a failing scenario, most aggressive first.
std::vector<ordered_json> simplifications(const ordered_json& s) {
  std::vector<ordered_json> out;
  const auto& steps = s["steps"];
  for (size_t i = steps.size(); i-- > 0 && steps.size() > 1;) {  // drop a step
    ordered_json t = s;
    t["steps"].erase(t["steps"].begin() + static_cast<long>(i));
    out.push_back(t);
  }
  for (size_t i = 0; i < steps.size(); ++i)  // fewer tokens in a step
    if (steps[i]["tokens"].get<int64_t>() > 1) {
      ordered_json t = s;
      t["steps"][i]["tokens"] = steps[i]["tokens"].get<int64_t>() - 1;
      out.push_back(t);
    }
  if (s["layer_types"].size() > 1)
    for (size_t i = 0; i < s["layer_types"].size(); ++i) {  // keep one layer
      ordered_json t = s;
      t["layer_types"] = ordered_json::array({s["layer_types"][i]});
      if (t["layer_types"][0] == "full_attention") t.erase("window");
      out.push_back(t);
    }
  for (const char* field : {"batch", "head_dim", "heads"}) {
    if (s[field].get<int64_t>() <= 1) continue;
    ordered_json t = s;
    t[field] = 1;
    if (std::string(field) == "heads") t["kv_heads"] = 1;
    if (std::string(field) == "batch" && !t["left_padding"].is_null()) t["left_padding"] = {s["left_padding"][0]};
    out.push_back(t);
  }
  if (!s["left_padding"].is_null()) {
    ordered_json t = s;
    t["left_padding"] = nullptr;
    out.push_back(t);
  }
  return out;
}

bool valid(const ordered_json& s) {
  try {
    cases::parse_case(s.dump(), s["name"].get<std::string>());
    int64_t total = 0;
    for (const auto& st : s["steps"]) total += st["tokens"].get<int64_t>();
    if (!s["left_padding"].is_null())
      for (const auto& lp : s["left_padding"])
        if (lp.get<int64_t>() >= s["steps"][0]["tokens"].get<int64_t>()) return false;
    return total > 0;
  } catch (const std::exception&) {
    return false;
  }
}

ordered_json shrink(Dumper& dumper, ordered_json failing, const std::string& release, bool own_release, Mutation mutation) {
  shrink::greedy(failing, simplifications, [&](const ordered_json& candidate) {
    return valid(candidate) && judge(dumper, candidate, release, own_release, mutation).disagree;
  });
  return failing;
}

}  // namespace

Summary run(const Options& options) {
  Options o = options;
  const std::string release = o.reference_release.empty() ? o.version : o.reference_release;
  const bool own_release = o.reference_release.empty();
  behaviours_for_release(release);  // an unknown release is bad usage, before the dumper starts
  Summary summary;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  if (o.shard_count < 1 || o.shard_index < 0 || o.shard_index >= o.shard_count)
    throw std::invalid_argument("differential: bad shard " + std::to_string(o.shard_index) + "/" + std::to_string(o.shard_count));
  // Sequence i is the same whichever shard or worker runs it: shards split one campaign, and the
  // workers of a shard take its sequences in turn. Results are kept per sequence and summed in
  // sequence order, so the report does not depend on the worker count.
  std::vector<int64_t> indices;
  for (int64_t i = o.shard_index; i < o.iterations; i += o.shard_count) indices.push_back(i);
  struct Result {
    bool done = false;
    Verdict verdict;
    std::string saved, message, scenario;
  };
  std::vector<Result> results(indices.size());
  std::mutex mu;  // guards next, results, the progress callback and RapidCheck (not thread-safe)
  size_t next = 0;
  int64_t done = 0, bad = 0;
  bool stop = false;
  std::exception_ptr error;
  auto worker = [&] {
    try {
      Dumper dumper(o.python, o.script);
      for (;;) {
        size_t j = 0;
        ordered_json scenario;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (stop || next >= indices.size() || (o.time_budget_s > 0 && elapsed() > o.time_budget_s)) return;
          j = next++;
          scenario = corpus::draw(o.seed, static_cast<uint64_t>(indices[j]),
                                  "diff_" + std::to_string(o.seed) + "_" + std::to_string(indices[j]));
        }
        const int64_t i = indices[j];
        Result r;
        r.done = true;
        r.verdict = judge(dumper, scenario, release, own_release, o.mutation);
        if (r.verdict.disagree) {
          ordered_json small = shrink(dumper, scenario, release, own_release, o.mutation);
          const std::string file_name = "diff_" + std::string(o.version) + "_" + std::to_string(o.seed) + "_" + std::to_string(i);
          std::string stem;
          for (char ch : file_name) stem += (std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_');
          small["name"] = stem;
          small["description"] = "Shrunk disagreement between transformers " + o.version +
                                 " and the C++ reference (kvconform fuzz --differential, seed " + std::to_string(o.seed) +
                                 ", sequence " + std::to_string(i) +
                                 "): " + judge(dumper, small, release, own_release, o.mutation).message;
          small["tags"] = {"differential", "transformers:" + o.version};
          r.saved = regressions::save(o.out_dir, "differential", regressions::target_name(o.version), small).path;
          r.scenario = scenario["name"].get<std::string>();
          r.message = r.scenario + ": " + r.verdict.message;
        }
        std::lock_guard<std::mutex> lock(mu);
        bad += r.verdict.disagree;
        results[j] = std::move(r);
        ++done;
        if (o.progress) o.progress(done, bad);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
      stop = true;
    }
  };
  const int workers = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(o.workers, static_cast<int64_t>(indices.size()))));
  std::vector<std::thread> pool;
  for (int w = 1; w < workers; ++w) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  for (size_t j = 0; j < results.size(); ++j) {
    const Result& r = results[j];
    if (!r.done) continue;
    ++summary.sequences;
    summary.steps += r.verdict.steps;
    summary.deviations += r.verdict.deviation;
    if (!r.verdict.disagree) continue;
    ++summary.disagreements;
    summary.saved.push_back(r.saved);
    summary.messages.push_back(r.message);
    summary.scenarios.push_back(r.scenario);
    summary.verdicts.push_back(r.verdict.message);
    summary.indices.push_back(indices[j]);
  }
  summary.workers = workers;
  summary.seconds = elapsed();
  return summary;
}

}  // namespace kvc::differential
