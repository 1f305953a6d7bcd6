// libFuzzer: the case loader on arbitrary bytes. A bad file must end as cases::CaseError (file and
// JSON pointer, exit 2); any other exception, a crash, a sanitizer report or a slow input is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kvconform/cases.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    // The default caps: what `kvconform run` applies. No extension: the name need not match a file.
    const kvc::Scenario c = kvc::cases::parse_case(text, "fuzz", kvc::cases::Limits{});
    // A loaded case can be used: its inputs are computable without overflow (small ones, to stay fast).
    if (c.batch * c.heads * c.steps.at(0).tokens * c.head_dim <= 4096)
      for (auto tensor : {kvc::inputs::kQuery, kvc::inputs::kKey, kvc::inputs::kValue}) c.step_inputs(tensor, 0, 0);
    (void)c.total_tokens();
  } catch (const kvc::cases::CaseError&) {
  }
  return 0;
}
