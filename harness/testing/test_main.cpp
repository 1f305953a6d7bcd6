// main() of every gtest binary that runs LibTorch: the CPU kernel pin first (golden/README.md
// "CPU kernel pin", kvc::golden::pin_cpu_kernels), as the kvconform CLI does, then the tests.
// A library of its own that only holds main(): the linker takes it from the archive because
// nothing else defines main, as it does gtest_main.
#include <gtest/gtest.h>

#include <iostream>

#include "kvconform/golden.h"

int main(int argc, char** argv) {
  for (const std::string& o : kvc::golden::pin_cpu_kernels())
    std::cerr << "CPU kernels not pinned: " << o << "; golden attention outputs are judged with tolerances\n";
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
