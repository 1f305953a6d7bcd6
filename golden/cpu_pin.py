"""The CPU kernel pin of every golden run of LibTorch (golden/README.md "CPU kernel pin").

Golden fixtures are judged bit for bit, so the kernels that compute them must not depend on the CPU.
By default they do: ATen dispatches its vectorised kernels by the CPU's ISA (AVX2 or AVX-512), MKL's
sgemm/dgemm picks a code path per CPU model (and another on AMD), and oneDNN takes bf16/fp16 matmuls
on CPUs with AVX-512 (or AVX2-VNNI-2) that the ATen fallback does on others. The pin fixes all three:

  ATEN_CPU_CAPABILITY=avx2    ATen's AVX2 kernels (every x86-64 machine here has AVX2)
  MKL_CBWR=COMPATIBLE         MKL's conditional bitwise reproducibility, SSE2 branch without
                              rcpps/rsqrtps: the one branch Intel documents as the same on Intel
                              and non-Intel CPUs (with a fixed thread count: torch runs with one)
  ONEDNN_MAX_CPU_ISA=AVX2     oneDNN sees no ISA above AVX2, so bf16/fp16 matmuls take ATen's
                              path on every CPU

The C++ side sets the same three (kvc::golden::pin_cpu_kernels(), harness/src/golden/golden.cpp) and the
two must stay equal: every fixture records the pin it was dumped under (`cpu_kernels`), and golden
replay judges attention outputs bitwise only where that record equals the running one.

apply() must run before torch is imported (ATen, MKL and oneDNN read the variables once, at their
first use). A variable the environment already sets is kept: an override is a deliberate choice,
and record() writes it into the fixtures, where the replay sees it and falls back to tolerances.
"""
import os
import sys

PIN = (("ATEN_CPU_CAPABILITY", "avx2"), ("MKL_CBWR", "COMPATIBLE"), ("ONEDNN_MAX_CPU_ISA", "AVX2"))

_applied = False


def apply():
    """Sets every pin variable the environment does not set. Before `import torch`."""
    global _applied
    if _applied:
        return
    if "torch" in sys.modules:
        # A fork server's child (python/kvconform/zygote.py) finds torch imported by its server, which
        # started with this environment (servers are keyed by it): every variable is there already.
        if all(name in os.environ for name, _ in PIN):
            _applied = True
            return
        raise RuntimeError("cpu_pin.apply() must run before torch is imported (golden/cpu_pin.py)")
    for name, value in PIN:
        os.environ.setdefault(name, value)
    _applied = True


def record():
    """What the fixtures record as `cpu_kernels`: each pin variable as this process has it (None
    where unset) and the ATen CPU capability in use (torch.backends.cpu.get_cpu_capability())."""
    import torch

    out = {name: os.environ.get(name) for name, _ in PIN}
    out["aten_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    return out
