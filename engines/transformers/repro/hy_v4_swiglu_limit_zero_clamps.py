#!/usr/bin/env python3
"""HYV4Config documents swiglu_limit as "Values at or below zero disable the clamp", but HYV4Experts._apply_gate
clamps whatever the limit (gate.clamp(max=limit), up.clamp(-limit, limit)), in 5.24.0 and 5.25.0 alike (and
hy_v4_vl's copy): swiglu_limit 0 sets every up activation to 0, so the routed experts add nothing, where the
documented reading (no clamp) leaves silu(gate) * up. A negative limit gives clamp(min=-limit > max=limit),
which torch answers with the max: every up activation becomes the (negative) limit.

    golden/.venv-5.25.0/bin/python engines/transformers/repro/hy_v4_swiglu_limit_zero_clamps.py

Released Hy4 checkpoints use 10.0 (the default), so they are not affected; nothing in the registry reads hy_v4
(engines/models/coverage.py says why). Exit 1 when a zero limit zeroes the experts (reproduces), 0 when it
disables the clamp.
"""
import sys

import torch
import transformers
from transformers.models.hy_v4.modeling_hy_v4 import HYV4Experts

config = transformers.HYV4Config(hidden_size=8, moe_intermediate_size=4, n_routed_experts=2, num_experts_per_tok=1,
                                 num_hidden_layers=1, swiglu_limit=0.0)
experts = HYV4Experts(config).double()
torch.manual_seed(0)
with torch.no_grad():
    for p in experts.parameters():
        p.normal_()
x = torch.randn(3, 8, dtype=torch.float64)
gate_up = torch.nn.functional.linear(x, experts.gate_up_proj[0])
gate, up = gate_up.chunk(2, dim=-1)
unclamped = torch.nn.functional.silu(gate) * up  # what "at or below zero disables the clamp" promises
got = experts._apply_gate(gate_up)
print(f"transformers {transformers.__version__}: swiglu_limit {config.swiglu_limit}: max |_apply_gate| "
      f"{got.abs().max().item():.3g}, max |silu(gate) * up| {unclamped.abs().max().item():.3g}")
sys.exit(1 if torch.equal(got, torch.zeros_like(got)) and unclamped.abs().max() > 0 else 0)
