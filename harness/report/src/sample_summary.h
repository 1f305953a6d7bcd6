// A RunSummary with one case of every status, a failure with a mask picture and text that needs
// escaping in every format. Shared by the report tests.
#pragma once

#include "kvconform/results.h"

namespace kvc::report::testing {

inline RunSummary sample_summary() {
  RunSummary run;
  run.tool_version = "kvconform 0.1.0";
  run.command = "kvconform run --seed 7 --property 'window_coverage|stored_rows'";
  run.seed = 7;

  CaseResult ok = named(PropertyKey{"stored_rows"});
  ok.params = "seed=7,iterations=100";
  ok.backend = "reference";
  ok.dtype = "mixed";
  ok.policy = "same-dtype-reference";
  ok.bound = 0.002;
  ok.error = 0.0005;
  run.cases.push_back(ok);

  CaseResult fail = ok;
  rename(fail, PropertyKey{"window_coverage"});
  fail.status = Status::Fail;
  fail.message =
      "Extend(2) after 1 tokens: static static/sliding_attention(W=2,L=2) boolean mask: query 2 (row 0) "
      "attends {0,1,2}, the window rule allows {1,2}";
  fail.detail =
      "kvc::ScenarioConfig:\nsliding_attention W=2 L=2 B=1 <H=1> & \"quoted\" 'single' | pipe ``` fence\n"
      "Prefill(1)\nExtend(2)\ncontrol\x01"
      "char bad\xff"
      "byte";
  fail.error = 0.25;  // over the bound: margin -0.248
  fail.reproduce = "kvconform run --property '^window_coverage$' --seed 7 --reproduce 'B8wdp5&<>'";
  MaskPicture m;
  m.title = "static/sliding_attention(W=2,L=2) step 2 batch row 0";
  m.query_positions = {1, 2};
  m.kv_offset = 0;
  m.kv_length = 3;
  m.window = 2;
  m.layer_type = "sliding_attention";
  m.rows = {"##.", "+##"};
  fail.masks.push_back(m);
  run.cases.push_back(fail);

  CaseResult dev = ok;
  rename(dev, GoldenKey{"5.24.0", "window1_dynamic_sliding"});
  dev.params = "steps=3";
  dev.backend = "eager";
  dev.dtype = "float32";
  dev.status = Status::Deviation;
  dev.policy.clear();  // judged no number
  dev.bound = -1;
  dev.error = -1;
  dev.message = "dynamic sliding layer with window 1 keeps 0 rows upstream";
  run.cases.push_back(dev);

  CaseResult skip = dev;
  rename(skip, GoldenKey{"5.24.0", "float16_static_sliding"});
  skip.backend = "sdpa";
  skip.dtype = "float16";
  skip.status = Status::Skipped;
  skip.message = "no float16 kernel on CPU";
  run.cases.push_back(skip);
  return run;
}

}  // namespace kvc::report::testing
