# onnxruntime-genai 0.18.0 (onnxruntime 1.32.0): the model builder builds a model with head_dim 8 (any head size not a
# multiple of 16), and the CPU GroupQueryAttention it writes then refuses the first forward ("head_size shall be a
# multiple of 16"): the limit is the kernel's, and nothing says so before a run (exit 1 = bug present).
import json, subprocess, sys, tempfile
import numpy as np, torch, onnxruntime_genai as og
from transformers import MistralConfig, MistralForCausalLM
head_dim = int(sys.argv[1]) if len(sys.argv) > 1 else 8
d = tempfile.mkdtemp(); src, out = f"{d}/hf", f"{d}/onnx"
torch.manual_seed(0)
cfg = MistralConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=64 // head_dim,
                    num_key_value_heads=64 // head_dim, head_dim=head_dim, sliding_window=None, max_position_embeddings=512)
MistralForCausalLM(cfg).eval().save_pretrained(src)
tok = {"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None,
       "model": {"type": "WordLevel", "vocab": {f"t{i}": i for i in range(256)}, "unk_token": "t0"}}
json.dump(tok, open(f"{src}/tokenizer.json", "w"))  # the builder insists on a tokenizer
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "t0"}, open(f"{src}/tokenizer_config.json", "w"))
built = subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", src, "-o", out, "-p", "fp32", "-e", "cpu"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(f"builder, head_dim {head_dim}: exit {built.returncode}")
m = og.Model(out); p = og.GeneratorParams(m); p.set_search_options(max_length=64); gen = og.Generator(m, p)
try:
    gen.append_tokens(np.array([[5]], dtype=np.int32))
    print("one token: logits", gen.get_output("logits").shape)
    sys.exit(0)
except Exception as e:
    print("one token:", str(e).strip()[:300])
    sys.exit(1)
