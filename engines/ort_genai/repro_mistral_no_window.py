# onnxruntime-genai 0.18.0: the model builder drops Mistral's sliding_window (MistralConfig has no layer_types) but still writes a genai_config sliding_window with "layers": [] (exit 1 = bug present).
import json, subprocess, sys, tempfile
import numpy as np, onnx, torch, onnxruntime_genai as og
from transformers import MistralConfig, MistralForCausalLM
d = tempfile.mkdtemp(); src, out = f"{d}/hf", f"{d}/onnx"
torch.manual_seed(0)
cfg = MistralConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, sliding_window=5, max_position_embeddings=512)
hf = MistralForCausalLM(cfg).eval(); hf.save_pretrained(src)
tok = {"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None,
       "model": {"type": "WordLevel", "vocab": {f"t{i}": i for i in range(256)}, "unk_token": "t0"}}
json.dump(tok, open(f"{src}/tokenizer.json", "w"))  # the builder insists on a tokenizer
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "t0"}, open(f"{src}/tokenizer_config.json", "w"))
subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", src, "-o", out, "-p", "fp32", "-e", "cpu"],
               check=True, stdout=subprocess.DEVNULL)
g = onnx.load(f"{out}/model.onnx", load_external_data=False)
lws = [a.i for n in g.graph.node if n.op_type == "GroupQueryAttention" for a in n.attribute if a.name == "local_window_size"]
print("GQA local_window_size per layer:", lws, "(config sliding_window = 5)")
print("genai_config sliding_window:", json.load(open(f"{out}/genai_config.json"))["model"]["decoder"].get("sliding_window"))
ids = list(range(3, 15))
with torch.no_grad():
    ref = hf(torch.tensor([ids])).logits[0].numpy()
m = og.Model(out); p = og.GeneratorParams(m); p.set_search_options(max_length=64); gen = og.Generator(m, p)
gen.append_tokens(np.array([ids], dtype=np.int32))
print("max |ort - transformers| per position:", np.abs(gen.get_output("logits")[0] - ref).max(-1).round(3))
try:
    gen.append_tokens(np.array([list(range(20, 40))], dtype=np.int32)); print("20 more tokens: ok")
except Exception as e:
    print("20 more tokens:", str(e)[:400])
sys.exit(1 if lws != [5] * len(lws) else 0)
