"""A Gemma4 text config.json that carries "rope_scaling": null beside "rope_parameters" (as configs
written by older tooling do) loses its rope_parameters in transformers 5.13.1 and 5.24.0: AutoConfig gives
rope_parameters None, and building the model raises TypeError in Gemma4TextRotaryEmbedding. The same
dict without the null key loads. Exit 1 while the bug is there. Only transformers and torch."""
import json
import sys
import tempfile

from transformers import AutoConfig, Gemma4ForCausalLM, __version__

config = {"model_type": "gemma4_text", "architectures": ["Gemma4ForCausalLM"], "vocab_size": 256, "hidden_size": 64,
          "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
          "head_dim": 16, "global_head_dim": 32, "sliding_window": 3, "hidden_size_per_layer_input": 0,
          "layer_types": ["sliding_attention", "full_attention"],
          "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                              "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                 "rope_theta": 1000000.0}}}
broken = False
for extra in ({}, {"rope_scaling": None}):
    with tempfile.TemporaryDirectory() as d:
        with open(f"{d}/config.json", "w") as f:
            json.dump({**config, **extra}, f)
        cfg = AutoConfig.from_pretrained(d)
        try:
            Gemma4ForCausalLM(cfg)
            built = "builds"
        except TypeError as e:
            built, broken = f"TypeError: {e}", broken or bool(extra)
        print(f"transformers {__version__}, config.json {'with' if extra else 'without'} rope_scaling: null: "
              f"rope_parameters {'None' if cfg.rope_parameters is None else 'kept'}; the model {built}")
sys.exit(1 if broken else 0)
