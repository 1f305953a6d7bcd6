# onnxruntime-genai 0.18.0 (onnxruntime 1.32.0): the model builder builds a Phi-3 whose rotary part is half of a
# head of 16 (partial_rotary_factor 0.5: rotary dim 8, a cos cache 4 wide), and the CPU GroupQueryAttention it writes
# then refuses the first forward ("cos_cache dimension 1 must be <= head_size / 2 and a multiple of 8"): nothing says
# so at build time (exit 1 = bug present; `repro_partial_rotary.py 1.0` rotates the whole head and exits 0).
import json, subprocess, sys, tempfile
import numpy as np, torch, onnxruntime_genai as og
from transformers import Phi3Config, Phi3ForCausalLM
factor = float(sys.argv[1]) if len(sys.argv) > 1 else 0.5
d = tempfile.mkdtemp(); src, out = f"{d}/hf", f"{d}/onnx"
torch.manual_seed(0)
cfg = Phi3Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
                 num_key_value_heads=4, sliding_window=None, max_position_embeddings=4096, original_max_position_embeddings=4096,
                 bos_token_id=1, eos_token_id=2, pad_token_id=0,
                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": factor})
Phi3ForCausalLM(cfg).eval().save_pretrained(src)
tok = {"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None,
       "model": {"type": "WordLevel", "vocab": {f"t{i}": i for i in range(256)}, "unk_token": "t0"}}
json.dump(tok, open(f"{src}/tokenizer.json", "w"))  # the builder insists on a tokenizer
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "t0"}, open(f"{src}/tokenizer_config.json", "w"))
built = subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", src, "-o", out, "-p", "fp32", "-e", "cpu"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(f"builder, head_dim 16, partial_rotary_factor {factor}: exit {built.returncode}")
m = og.Model(out); p = og.GeneratorParams(m); p.set_search_options(max_length=64); gen = og.Generator(m, p)
try:
    gen.append_tokens(np.array([[5]], dtype=np.int32))
    print("one token: logits", gen.get_output("logits").shape)
    sys.exit(0)
except Exception as e:
    print("one token:", str(e).strip()[:300])
    sys.exit(1)
