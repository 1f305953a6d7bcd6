# optimum-executorch 1.1.0 (executorch 1.5.1): a Mistral config (sliding_window, no layer_types) exported with
# use_custom_sdpa + use_custom_kv_cache takes the static-cache path; ETCustomStaticCache gives the sliding layers
# a plain (non-ring) CustomKVCache of W slots, so decoding position W aborts the process (SIGABRT):
# "op_update_cache.cpp:59 Check failed (start_pos < quantized_cache.size(1)): start_pos: 5 ... cache size ... 5".
import sys, tempfile, torch
import optimum.exporters.executorch.convert  # noqa: F401  registers attn "custom_sdpa"
from optimum.exporters.executorch.tasks.causal_lm import load_causal_lm_model
from optimum.executorch.attentions.custom_kv_cache import replace_with_et_custom_kv_cache
from transformers import MistralConfig, MistralForCausalLM
from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM
torch.manual_seed(0); d = tempfile.mkdtemp()
cfg = MistralConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, sliding_window=5, max_position_embeddings=512)
MistralForCausalLM(cfg).save_pretrained(d)
w = load_causal_lm_model(d, dtype="float32", use_custom_sdpa=True, use_custom_kv_cache=True, max_seq_len=32)
m = TorchExportableModuleForDecoderOnlyLM(w.model); w._register_custom_attention(m)
replace_with_et_custom_kv_cache(m.model, w.model.config, w.model.generation_config, torch.float32)
print("caches:", [(type(c).__name__, tuple(c.k_cache.shape)) for c in m.model.static_cache.kv_cache])
with torch.no_grad():
    for p in range(8):  # one token per call, as the runner decodes; max_seq_len is 32
        m(input_ids=torch.tensor([[3 + p]]), cache_position=torch.tensor([p])); print("position", p, "ok", flush=True)
sys.exit(0)
