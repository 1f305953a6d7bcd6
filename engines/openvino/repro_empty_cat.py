#!/usr/bin/env python3
"""openvino.convert_model refuses transformers' DynamicCache lazy initialisation.

transformers 5.24.0's DynamicLayer starts a layer's keys as torch.tensor([]) (1-D, empty) and grows
them with torch.cat([keys, new], dim=-2). PyTorch accepts the 1-D empty operand (its legacy rule skips
it); OpenVINO 2026.4.1's PyTorch frontend converts aten::cat to Concat and fails:
  Check 'is_axis_valid(axis, r)' failed ... Axis -2 out of the tensor rank range [-1, 0].
Run with the engine's venv: `$(bash engines/setup_env.sh openvino) engines/openvino/repro_empty_cat.py`.
Prints the PyTorch result, then OpenVINO's error (exit 1) or its result (exit 0, fixed upstream).
"""
import sys

import openvino as ov
import torch


class Grow(torch.nn.Module):
    def forward(self, x):
        keys = torch.tensor([], dtype=x.dtype)  # what DynamicLayer.lazy_initialization does
        return torch.cat([keys, x], dim=-2)


x = torch.randn(1, 2, 3, 4)
print("torch:", tuple(Grow()(x).shape))
try:
    m = ov.convert_model(Grow(), example_input=(x,))
except Exception as e:
    print("openvino", ov.get_version(), "convert_model:", str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__)
    print("  ", next((l for l in str(e).splitlines() if "Axis" in l), ""))
    sys.exit(1)
print("openvino:", tuple(ov.Core().compile_model(m, "CPU")(x.numpy())[0].shape))
