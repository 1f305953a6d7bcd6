#!/usr/bin/env python3
"""openvino.convert_model has no conversion rule for aten::histc.

transformers 5.24.0 runs a MoE's experts with grouped_mm by default (integrations/moe.py), which counts
the tokens per expert with torch.histc. OpenVINO 2026.4.1's PyTorch frontend cannot convert it:
  OpConversionFailure ... No conversion rule found for operations: aten::histc
so a gpt_oss checkpoint does not export as transformers loads it (the adapter selects batched_mm).
Run with the engine's venv: `$(bash engines/setup_env.sh openvino) engines/openvino/repro_histc.py`.
Prints the PyTorch result, then OpenVINO's error (exit 1) or its result (exit 0, fixed upstream).
"""
import sys

import openvino as ov
import torch


class TokensPerExpert(torch.nn.Module):
    def forward(self, expert_ids):
        # what grouped_mm_experts_forward does on the CPU (float input, fixed bounds)
        return torch.histc(expert_ids.float(), bins=4, min=0, max=3)


x = torch.tensor([0, 2, 2, 3, 1, 2])
print("torch:", TokensPerExpert()(x).tolist())
try:
    m = ov.convert_model(TokensPerExpert(), example_input=(x,))
except Exception as e:
    print("openvino", ov.get_version(), "convert_model:", type(e).__name__)
    print("  ", next((l.strip() for l in str(e).splitlines() if "histc" in l), str(e).strip().splitlines()[-1]))
    sys.exit(1)
print("openvino:", ov.Core().compile_model(m, "CPU")(x.numpy())[0].tolist())
