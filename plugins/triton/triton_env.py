"""The Triton kernels' imports: vLLM's and SGLang's kernel files, unpacked by setup_env.sh into the
venv's kernel-src/ folder, imported with the packages' heavy __init__ bypassed.

The files are imported under their own module names (vllm.v1.attention.ops...., sglang.kernels....)
as namespace packages: setup_env.sh unpacks no __init__.py, so `import vllm` runs nothing. What the
files import beyond Triton and torch is a stub here, each answering as vLLM / SGLang do on a machine
without a GPU: no CUDA, no ROCm, no device capability, every environment flag at its default.

    TRITON_INTERPRET=1 python plugins/triton/triton_env.py --check    (imports and runs each kernel once)
"""
import ast
import enum
import logging
import os
import sys
import types

SRC = os.path.join(sys.prefix, "kernel-src")


def _module(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


def _kv_quant_mode():
    """vLLM's KVQuantMode (an IntEnum the kernel takes as a constexpr), its class taken verbatim from
    the unpacked kv_cache_interface.py (whose own imports pull in most of vLLM)."""
    path = os.path.join(SRC, "vllm", "v1", "kv_cache_interface.py")
    text = open(path).read()
    node = next(n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == "KVQuantMode")
    scope = {"IntEnum": enum.IntEnum, "__name__": "vllm.v1.kv_cache_interface"}
    exec(compile(ast.Module(body=[node], type_ignores=[]), path, "exec"), scope)
    return scope["KVQuantMode"]


class _CpuPlatform:
    """vllm.platforms.current_platform on a machine without a GPU (the answers that the kernel files ask)."""

    @staticmethod
    def fp8_dtype():
        import torch
        return torch.float8_e4m3fn  # vLLM's CUDA/CPU platforms' choice (ROCm's fnuz is not this machine)

    @staticmethod
    def is_rocm():
        return False

    @staticmethod
    def is_cuda():
        return False

    @staticmethod
    def get_device_capability(device_id=0):
        return None

    @staticmethod
    def has_device_capability(capability, device_id=0):
        return False

    @staticmethod
    def is_device_capability_family(capability, device_id=0):
        return False


class _Flag:
    def __init__(self, name):
        self.name = name

    def get(self):
        return False  # every SGLANG_* flag the kernel files read is off by default


class _Envs:
    def __getattr__(self, name):
        return _Flag(name)


def install_stubs():
    if "vllm.platforms" in sys.modules:
        return
    if not os.path.isdir(SRC):
        raise SystemExit(f"triton_env: no {SRC}: run plugins/triton/setup_env.sh and use its python")
    sys.path.insert(0, SRC)
    import triton
    import triton.language as tl
    import torch  # noqa: F401  (the kernels' tensors)
    # vLLM
    _module("vllm.envs", VLLM_BATCH_INVARIANT=False)
    _module("vllm.logger", init_logger=logging.getLogger)
    _module("vllm.platforms", current_platform=_CpuPlatform())
    _module("vllm.triton_utils", triton=triton, tl=tl, HAS_TRITON=True, LOG2E=1.4426950408889634,
            LOGE2=0.6931471805599453)
    _module("vllm.v1.kv_cache_interface", KVQuantMode=_kv_quant_mode())
    # SGLang
    _module("sglang.srt.environ", envs=_Envs())
    _module("sglang.srt.utils", is_cuda=lambda: False, is_hip=lambda: False, is_gfx95_supported=lambda: False,
            is_gfx1250_supported=lambda: False, get_device_core_count=lambda device_id=0: os.cpu_count() or 1)


def vllm_unified_attention():
    install_stubs()
    from vllm.v1.attention.ops import triton_unified_attention
    return triton_unified_attention


def sglang_extend_attention():
    install_stubs()
    from sglang.kernels.ops.attention import extend_attention
    return extend_attention


def sglang_decode_attention():
    install_stubs()
    from sglang.kernels.ops.attention import decode_attention
    return decode_attention


def _check():
    """Import every unpacked kernel file and run each once on a tiny input (prefix_prefill, vLLM's older
    paged prefill with its 5-D packed cache, is imported only: no adapter calls it)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("triton_env --check: set TRITON_INTERPRET=1 (this machine has no GPU)")
    install_stubs()
    import importlib
    import torch
    for name in ("vllm.v1.attention.ops.triton_unified_attention", "vllm.v1.attention.ops.prefix_prefill",
                 "vllm.v1.attention.ops.triton_decode_attention", "sglang.kernels.ops.attention.extend_attention",
                 "sglang.kernels.ops.attention.decode_attention", "sglang.kernels.ops.attention.prefill_attention"):
        importlib.import_module(name)
        print(f"triton_env: imported {name}")
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import sglang_decode_adapter
    import sglang_extend_adapter
    import vllm_triton_adapter
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, n, 2, 16, generator=g) for n in (3, 5, 5))
    ref = _sdpa(q, k, v, window=3)
    for name, fn in (("vllm unified_attention", vllm_triton_adapter.attend_packed),
                     ("sglang extend_attention_fwd", sglang_extend_adapter.extend_packed)):
        out = fn(q[0], k[0], v[0], window=3, scale=0.25)
        err = (out - ref[0]).abs().max().item()
        print(f"triton_env: {name} ran: max |out - sdpa| = {err:.2e}")
        if err > 1e-5:
            raise SystemExit(f"triton_env --check: {name} is off by {err}")
    # two kernels without a window argument (not adapted), once each with no window
    from vllm.v1.attention.ops import triton_decode_attention
    from sglang.kernels.ops.attention import prefill_attention
    length = k.shape[1]
    full = _sdpa(q, k, v, window=length)
    o = torch.empty_like(q[0, -1:])
    triton_decode_attention.decode_attention_fwd(q[0, -1:], k[0], v[0], o, torch.empty(1, 2),
                                                 torch.arange(length, dtype=torch.int32)[None],
                                                 torch.tensor([length], dtype=torch.int32), torch.empty(1, 2, 4, 17), 4,
                                                 0.25)
    kq = torch.randn(1, length, 2, 16, generator=g)
    op = torch.empty_like(kq[0])
    prefill_attention.context_attention_fwd(kq[0], k[0], v[0], op, torch.tensor([0]), torch.tensor([length]), length,
                                            is_causal=True, sm_scale=0.25)
    for name, out, expect in (("vllm triton_decode_attention", o, full[0, -1:]),
                              ("sglang prefill_attention", op, _sdpa(kq, k, v, window=length)[0])):
        err = (out - expect).abs().max().item()
        print(f"triton_env: {name} ran (no window): max |out - sdpa| = {err:.2e}")
        if err > 1e-5:
            raise SystemExit(f"triton_env --check: {name} is off by {err}")
    out = sglang_decode_adapter.decode_packed(q[0, -1:], k[0], v[0], window=3, scale=0.25)
    err = (out - ref[0, -1:]).abs().max().item()
    print(f"triton_env: sglang decode_attention_fwd ran: max |out - sdpa| = {err:.2e}")
    if err > 1e-5:
        raise SystemExit(f"triton_env --check: sglang decode_attention_fwd is off by {err}")


def _sdpa(q, k, v, window):
    """A smoke test's expectation only (the conformance verdicts come from kvconform's reference)."""
    import torch
    n, length = q.shape[1], k.shape[1]
    i = torch.arange(n)[:, None] + length - n
    j = torch.arange(length)[None, :]
    mask = (j <= i) & (j > i - window)
    return torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                            attn_mask=mask, scale=0.25).transpose(1, 2)


if __name__ == "__main__":
    if sys.argv[1:] != ["--check"]:
        raise SystemExit(__doc__)
    _check()
