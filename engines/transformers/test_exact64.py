#!/usr/bin/env python3
"""exact64.py reads what the float64 proof needs through the model's configuration, checked against
transformers' own forward, never through a norm's private attribute names: on the newest pinned
release (or the given golden/.venv-X python's), a norm whose epsilon attribute is renamed still
runs, a configuration whose epsilon is not the module's raises naming the candidates, and a rotary
scaling read wrong raises.

    python3 engines/transformers/test_exact64.py [VERSION]     # exit 77 without that release's venv
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

CHECKS = r'''
import sys, types
import torch
import exact64
from transformers.models.qwen3 import modeling_qwen3 as q3
from transformers.models.gemma4 import modeling_gemma4 as g4
from transformers import Qwen3Config

failed = 0
def expect(name, ok, detail=""):
    global failed
    failed += not ok
    print(("ok: " if ok else "FAIL: ") + name + ("" if ok else ": " + detail))

def tiny(eps):
    return Qwen3Config(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                       num_key_value_heads=1, head_dim=8, rms_norm_eps=eps)

class Model(torch.nn.Module):  # what patch() walks: named_modules() and .config
    def __init__(self, config, **mods):
        super().__init__()
        self.config = config
        for k, m in mods.items():
            setattr(self, k, m)

torch.manual_seed(0)
# 1. the epsilon comes from the configuration; the module's own attribute names are never read
norm = g4.Gemma4RMSNorm(16, eps=1e-5)
torch.nn.init.normal_(norm.weight)
bare = g4.Gemma4RMSNorm(16, eps=1e-5, with_scale=False)
model = Model(tiny(1e-5), norm=norm, bare=bare).to(torch.float64)
exact64.patch(model)
for m in (norm, bare):
    for k in [k for k in vars(m) if "eps" in k and not k.startswith("_kvc")]:
        delattr(m, k)  # as a release that renames it
x = torch.randn(3, 16, dtype=torch.float64) * 1e-3
try:
    got = norm(x)
    want = x * torch.pow(x.pow(2).mean(-1, keepdim=True) + 1e-5, -0.5) * norm.weight
    expect("a norm whose epsilon attribute is renamed runs on the configuration's epsilon",
           torch.equal(got, want), f"max diff {(got - want).abs().max()}")
    expect("a norm without scale stays without scale", torch.equal(bare(x), x * torch.pow(x.pow(2).mean(-1, keepdim=True) + 1e-5, -0.5)))
except AttributeError as e:
    expect("a norm whose epsilon attribute is renamed runs on the configuration's epsilon", False, repr(e))

# 2. a module built with an epsilon that is neither the configuration's nor the class default: no
#    candidate reproduces transformers' forward
other = q3.Qwen3RMSNorm(16, eps=3e-4)
try:
    exact64.patch(Model(tiny(1e-5), norm=other).to(torch.float64))
    expect("an epsilon transformers' own forward does not confirm raises", False, "patch() accepted it")
except RuntimeError as e:
    expect("an epsilon transformers' own forward does not confirm raises",
           "cannot identify the epsilon of Qwen3RMSNorm" in str(e) and "1e-05" in str(e), str(e))

# 3. a rotary scaling read wrong (a release that renames attention_scaling: the float64 forward keeps 1.0)
rot = q3.Qwen3RotaryEmbedding(tiny(1e-6))
rot.attention_scaling = 1.25  # transformers' own forward scales cos and sin by it
exact64.patch(Model(tiny(1e-6), rot=rot).to(torch.float64))
expect("a rotary scaling read right is accepted", rot._kvc_scaling[""] == 1.25, str(rot._kvc_scaling))
rot._kvc_scaling[""] = 1.0
try:
    exact64._check_rotary(rot)
    expect("a rotary scaling read wrong raises", False, "_check_rotary accepted it")
except RuntimeError as e:
    expect("a rotary scaling read wrong raises", "parts from transformers' own" in str(e), str(e))
sys.exit(1 if failed else 0)
'''


def main(argv):
    versions = sorted((f[len("requirements-"):-4] for f in os.listdir(os.path.join(ROOT, "golden"))
                       if f.startswith("requirements-") and f.endswith(".txt")), key=lambda v: tuple(map(int, v.split("."))))
    v = argv[0] if argv else versions[-1]
    py = os.path.join(ROOT, "golden", f".venv-{v}", "bin", "python")
    if not os.path.exists(py):
        print(f"SKIP: no golden/.venv-{v} (bash golden/setup_env.sh {v})")
        return 77
    r = subprocess.run([py, "-c", CHECKS], env=dict(os.environ, PYTHONPATH=HERE), capture_output=True, text=True)
    print(r.stdout + "".join(l + "\n" for l in r.stderr.splitlines() if "Traceback" in l or "Error" in l), end="")
    print(f"test_exact64 ({v}): {'passed' if r.returncode == 0 else 'FAILED'}")
    return 0 if r.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
