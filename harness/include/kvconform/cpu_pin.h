// The CPU kernel pin, with no LibTorch: the `kvconform` launcher sets it for the engine processes it
// starts exactly as the LibTorch subcommands set it for themselves.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kvc::golden {

// The CPU kernel pin (golden/README.md "CPU kernel pin"; golden/cpu_pin.py is the Python side and
// must stay equal): ATEN_CPU_CAPABILITY=avx2, MKL_CBWR=COMPATIBLE, ONEDNN_MAX_CPU_ISA=AVX2, so that
// LibTorch computes the same bits on every x86-64 CPU with AVX2 (Intel or AMD, AVX2-only or
// AVX-512). Sets each variable the environment does not set (an override is kept, recorded by
// cpu_kernels() and so seen by the replay); returns one line per override, empty when pinned.
// Call it first thing in main(), before any LibTorch op: ATen, MKL and oneDNN read the variables
// once, at first use. The kvconform CLI and every gtest binary that runs LibTorch do.
std::vector<std::string> pin_cpu_kernels();

// The pin's variables and values, in golden/cpu_pin.py's order.
const std::vector<std::pair<const char*, const char*>>& cpu_pin();

}  // namespace kvc::golden
