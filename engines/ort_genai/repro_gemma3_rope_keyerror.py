# onnxruntime-genai 0.18.0's model builder cannot build any Gemma3ForCausalLM under transformers 5.x: transformers
# nests Gemma3's rope_parameters per layer type ({"sliding_attention": {...}, "full_attention": {...}}) and the
# builder's base make_rope_init reads config.rope_parameters["rope_type"] (exit 1 = bug present).
import json, subprocess, sys, tempfile
import torch, transformers
from transformers import Gemma3ForCausalLM, Gemma3TextConfig
d = tempfile.mkdtemp(); src, out = f"{d}/hf", f"{d}/onnx"
torch.manual_seed(0)
cfg = Gemma3TextConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=16, sliding_window=4, layer_types=["sliding_attention", "full_attention"])
Gemma3ForCausalLM(cfg).save_pretrained(src)
print("transformers", transformers.__version__, "rope_parameters:", Gemma3TextConfig.from_pretrained(src).rope_parameters)
tok = {"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None,
       "model": {"type": "WordLevel", "vocab": {f"t{i}": i for i in range(256)}, "unk_token": "t0"}}
json.dump(tok, open(f"{src}/tokenizer.json", "w"))  # the builder insists on a tokenizer
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "t0"}, open(f"{src}/tokenizer_config.json", "w"))
r = subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", src, "-o", out, "-p", "fp32", "-e", "cpu"],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
print("builder rc", r.returncode, "|", " | ".join(l for l in r.stdout.splitlines()[-3:]))
sys.exit(1 if r.returncode else 0)
