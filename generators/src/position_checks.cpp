// The position-level property checks shared by both engines (position_checks.h). Messages are
// built only on failure: string building would cost more than the checks on the fast engine.
#include "kvcgen/position_checks.h"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace kvc::campaign {

std::string StepAt::where() const {
  return std::string(command) + "(" + std::to_string(q) + ") after " + std::to_string(seen) + " tokens";
}

std::string StepAt::who() const { return where() + ": " + role + " " + spec->describe(); }

std::string rows_str(const fast::TokenRows& rows) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < rows.size(); ++i) {
    os << (i ? "," : "");
    if (rows[i] == fast::kUnwritten) os << "_";
    else os << rows[i];
  }
  return os.str() + "]";
}

fast::TokenRows token_rows(const positions::Rows& rows) {
  fast::TokenRows t;
  t.reserve(rows.size());
  for (const auto& r : rows) t.push_back(r ? *r : fast::kUnwritten);
  return t;
}

std::string rows_str(const positions::Rows& rows) { return rows_str(token_rows(rows)); }

namespace {
bool same(const fast::TokenRows& got, const positions::Rows& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != (want[i] ? *want[i] : fast::kUnwritten)) return false;
  return true;
}
}  // namespace

std::string PositionChecks::stored(const StepAt& at, const fast::TokenRows& stored) const {
  const positions::Rows expected = positions::stored_rows(*at.spec, at.seen + at.q);
  if (!same(stored, expected)) return at.who() + " stores tokens " + rows_str(stored) + ", expected " + rows_str(expected);
  return {};
}

std::string PositionChecks::returned(const StepAt& at, MaskSizes sizes, const fast::TokenRows& returned) const {
  const int64_t seen = at.seen, q = at.q;
  const MaskSizes documented = positions::mask_sizes(*at.spec, seen, q);
  if (sizes != documented)
    return at.who() + " get_mask_sizes = (kv_length " + std::to_string(sizes.kv_length) + ", kv_offset " +
           std::to_string(sizes.kv_offset) + "), documented (" + std::to_string(documented.kv_length) + ", " +
           std::to_string(documented.kv_offset) + ")";
  if (static_cast<int64_t>(returned.size()) != sizes.kv_length)
    return at.who() + " update returned " + std::to_string(returned.size()) + " rows but get_mask_sizes said kv_length " +
           std::to_string(sizes.kv_length);
  for (int64_t j = 0; j < sizes.kv_length; ++j) {
    const int64_t tok = sizes.kv_offset + j;
    if (returned[static_cast<size_t>(j)] != (tok < seen + q ? tok : fast::kUnwritten)) {
      fast::TokenRows expected;
      for (int64_t i = 0; i < sizes.kv_length; ++i)
        expected.push_back(sizes.kv_offset + i < seen + q ? sizes.kv_offset + i : fast::kUnwritten);
      return at.who() + " returned tokens " + rows_str(returned) + ", expected " + rows_str(expected) + " (kv_offset " +
             std::to_string(sizes.kv_offset) + ")";
    }
  }
  return {};
}

std::string PositionChecks::coverage(const StepAt& at, int64_t batch, const LeftPadding& padding, MaskSizes sizes,
                                     const fast::TokenRows& returned, const std::vector<uint8_t>& mask, bool skipped,
                                     bool lost_keys) {
  const int64_t cols = sizes.kv_length;
  if (cols != static_cast<int64_t>(returned.size()))
    return at.who() + " mask has " + std::to_string(cols) + " key columns but update returned " +
           std::to_string(returned.size()) + " rows";
  const int64_t first_key = lost_keys ? sizes.kv_offset : 0;
  if (std::string e = pattern(at, "boolean mask", batch, padding, returned, mask, false, cols, first_key); !e.empty()) return e;
  // Where the layer already drops window keys, transformers may also skip a chunked mask whose
  // keys straddle a chunk boundary (kv_length < chunk size, kv_offset not chunk-aligned): the same
  // upstream deviation, counted there, not a reference bug.
  if (!lost_keys && skipped) {
    fast::implied_by_skip(at.q, cols, implied_);
    return pattern(at, "skipped mask (is_causal)", batch, padding, returned, implied_, true, cols, 0);
  }
  return {};
}

// shared_rows: the pattern is [q][cols] for every batch row (SDPA's is_causal) instead of [b][q][cols].
std::string PositionChecks::pattern(const StepAt& at, const char* form, int64_t batch, const LeftPadding& padding,
                                    const fast::TokenRows& returned, const std::vector<uint8_t>& cells, bool shared_rows,
                                    int64_t cols, int64_t first_key) {
  const LayerSpec& spec = *at.spec;
  const int64_t w = spec.window, seen = at.seen, q = at.q;
  const int64_t total = seen + q;
  const auto who = [&] { return at.who() + " " + form; };
  if (static_cast<int64_t>(stamp_.size()) < total) stamp_.resize(static_cast<size_t>(total), 0);
  if (static_cast<int64_t>(zeros_.size()) < cols) {
    zeros_.resize(static_cast<size_t>(cols), 0);
    ones_.resize(static_cast<size_t>(cols), 1);
  }
  // The leading columns that hold consecutive tokens run_base, run_base + 1, ...
  const int64_t run_base = cols > 0 ? returned[0] : 0;
  int64_t run_length = 0;
  while (run_length < cols && run_base >= 0 && returned[static_cast<size_t>(run_length)] == run_base + run_length) ++run_length;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t lp = padding ? (*padding)[static_cast<size_t>(b)] : 0;
    // The keys the window rule (positions::window_allows) lets a query see form one run ending at
    // the query (fastpath_test checks this of every rule), and where it starts never moves back as
    // the query advances: one pointer over the step's queries finds each run's start. Keys more
    // than a window back are outside any sliding window or chunk holding the query.
    int64_t start = std::max<int64_t>(std::max(first_key, lp), 0);
    for (int64_t i = 0; i < q; ++i) {
      const int64_t qpos = seen + i;
      const uint8_t* row = cells.data() + ((shared_rows ? 0 : b * q) + i) * cols;
      const int64_t query_id = ++query_counter_;  // stamp_[t] == query_id: t attended by this query
      if (spec.type != LayerType::Full) start = std::max(start, qpos - w + 1);
      while (start <= qpos && !positions::window_allows(spec.type, w, lp, qpos, start)) ++start;
      const int64_t rule = std::max<int64_t>(qpos - start + 1, 0);
      // Quick pass: where the returned rows hold consecutive tokens (as every correct layer returns
      // them), the rule's run [start, qpos] is one run of columns, and a row that is exactly that
      // run of ones among zeros attends exactly the rule's set. Anything else goes through the
      // exact check below, which decides and names what is wrong.
      if (rule > 0 && start >= run_base && qpos < run_base + run_length) {
        const int64_t j0 = start - run_base, n = rule;
        if (std::memcmp(row, zeros_.data(), static_cast<size_t>(j0)) == 0 &&
            std::memcmp(row + j0, ones_.data(), static_cast<size_t>(n)) == 0 &&
            std::memcmp(row + j0 + n, zeros_.data(), static_cast<size_t>(cols - j0 - n)) == 0)
          continue;
      }
      int64_t attended = 0;
      bool wrong = false;
      for (int64_t j = 0; j < cols; ++j) {
        if (j + 8 <= cols) {  // masked keys come in runs: skip eight at a time
          uint64_t eight;
          std::memcpy(&eight, row + j, 8);
          if (!eight) {
            j += 7;
            continue;
          }
        }
        if (!row[j]) continue;
        const int64_t tok = returned[static_cast<size_t>(j)];
        if (tok == fast::kUnwritten || tok >= total)
          return who() + ": query " + std::to_string(qpos) + " (row " + std::to_string(b) + ") attends column " +
                 std::to_string(j) + ", an unwritten row";
        if (stamp_[static_cast<size_t>(tok)] == query_id)
          return who() + ": query " + std::to_string(qpos) + " attends token " + std::to_string(tok) + " twice";
        stamp_[static_cast<size_t>(tok)] = query_id;
        ++attended;
        wrong = wrong || tok < start || tok > qpos;
      }
      if (wrong || attended != rule) {
        std::string sees, allows;
        for (int64_t k = 0; k < total; ++k) {
          if (stamp_[static_cast<size_t>(k)] == query_id) sees += (sees.empty() ? "" : ",") + std::to_string(k);
          if (k >= lp && k >= first_key && positions::window_allows(spec.type, w, lp, qpos, k))
            allows += (allows.empty() ? "" : ",") + std::to_string(k);
        }
        return who() + ": query " + std::to_string(qpos) + " (row " + std::to_string(b) + ") attends {" + sees +
               "}, the window rule allows {" + allows + "}";
      }
    }
  }
  return {};
}

}  // namespace kvc::campaign
