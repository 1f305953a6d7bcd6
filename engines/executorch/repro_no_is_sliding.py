# optimum-executorch 1.1.0 (executorch 1.5.1): the ring cache's window mask is applied only where the attention module
# has is_sliding (custom_sdpa.py, _custom_sdpa_for_ring_kv_cache), which in its transformers (5.0.0rc1) only Gemma 3 and
# EXAONE 4 set. A Qwen2 with its window on (use_sliding_window) through use_custom_sdpa + use_custom_kv_cache attends
# past the window from position W on; with --gpt-oss the same for gpt-oss, whose sinks (s_aux) custom_sdpa also drops,
# so it is off from position 0. With --llama4, a Llama 4 text model (chunked attention) does not run at all: custom_sdpa
# needs position_ids to place a causal step and Llama4TextAttention does not pass them (AssertionError at position 0).
# Exit 0 only if executorch matches transformers' eager forward at every position.
import sys, tempfile, torch
import optimum.exporters.executorch.convert  # noqa: F401  registers attn "custom_sdpa"
from optimum.exporters.executorch.tasks.causal_lm import load_causal_lm_model
from optimum.executorch.attentions.custom_kv_cache import replace_with_et_custom_kv_cache
from transformers import AutoModelForCausalLM, GptOssConfig, Llama4TextConfig, Qwen2Config
from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM
torch.manual_seed(0); d = tempfile.mkdtemp()
common = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, sliding_window=4, initializer_range=0.5)
if "--llama4" in sys.argv:
    cfg = Llama4TextConfig(**{k: v for k, v in common.items() if k != "sliding_window"}, intermediate_size_mlp=128,
                           attention_chunk_size=4, num_local_experts=1, interleave_moe_layer_step=1)
elif "--gpt-oss" in sys.argv:
    cfg = GptOssConfig(**common, num_local_experts=2, num_experts_per_tok=1, layer_types=["sliding_attention"] * 2)
else:
    cfg = Qwen2Config(**common, use_sliding_window=True, max_window_layers=0)
AutoModelForCausalLM.from_config(cfg).save_pretrained(d)
ref = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager").eval()
w = load_causal_lm_model(d, dtype="float32", use_custom_sdpa=True, use_custom_kv_cache=True, max_seq_len=32,
                         cache_implementation="static" if "--llama4" in sys.argv else "hybrid")
m = TorchExportableModuleForDecoderOnlyLM(w.model); w._register_custom_attention(m)
replace_with_et_custom_kv_cache(m.model, w.model.config, w.model.generation_config, torch.float32)
print("is_sliding on the attention modules:", sorted({hasattr(a, "is_sliding") for a in m.model.modules() if a.__class__.__name__.endswith("Attention")}))
ids, worst = list(range(3, 3 + 7)), 0.0
with torch.no_grad():
    want = ref(torch.tensor([ids])).logits[0]
    for p, t in enumerate(ids):  # one token per call, as the runner decodes
        err = (m(input_ids=torch.tensor([[t]]), cache_position=torch.tensor([p]))[0, -1] - want[p]).abs().max().item()
        print(f"position {p}: max |executorch - transformers| = {err:.4f}", flush=True); worst = max(worst, err)
sys.exit(1 if worst > 1e-4 else 0)
