# optimum-executorch 1.1.0 (executorch 1.5.1): Gemma2 through use_custom_sdpa + use_custom_kv_cache (what optimum-cli
# export executorch --use_custom_sdpa --use_custom_kv_cache builds): (1) attn_logit_softcapping is dropped by
# custom_sdpa (logits differ from position 1), (2) Gemma2Attention has no is_sliding, so its sliding layers' ring
# buffers get no window mask (errors from position W) and
# are read as linear caches: the process aborts (SIGABRT) at position 2*W. Exit 0 only if neither shows.
import sys, tempfile, torch
import optimum.exporters.executorch.convert  # noqa: F401  registers attn "custom_sdpa"
from optimum.exporters.executorch.tasks.causal_lm import load_causal_lm_model
from optimum.executorch.attentions.custom_kv_cache import replace_with_et_custom_kv_cache
from transformers import Gemma2Config, Gemma2ForCausalLM
from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM
torch.manual_seed(0); d = tempfile.mkdtemp()
cfg = Gemma2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=16, sliding_window=4, attn_logit_softcapping=10.0,
                   initializer_range=0.5)  # scores large enough for the softcap to matter
Gemma2ForCausalLM(cfg).save_pretrained(d)
ref = Gemma2ForCausalLM.from_pretrained(d, attn_implementation="eager").eval()  # eager applies the softcap
w = load_causal_lm_model(d, dtype="float32", use_custom_sdpa=True, use_custom_kv_cache=True, max_seq_len=32,
                         cache_implementation="hybrid")
m = TorchExportableModuleForDecoderOnlyLM(w.model); w._register_custom_attention(m)
replace_with_et_custom_kv_cache(m.model, w.model.config, w.model.generation_config, torch.float32)
ids, worst = list(range(3, 3 + 12)), 0.0
with torch.no_grad():
    want = ref(torch.tensor([ids])).logits[0]
    for p, t in enumerate(ids):  # one token per call, as the runner decodes
        err = (m(input_ids=torch.tensor([[t]]), cache_position=torch.tensor([p]))[0, -1] - want[p]).abs().max().item()
        print(f"position {p}: max |executorch - transformers| = {err:.4f}", flush=True); worst = max(worst, err)
sys.exit(1 if worst > 1e-4 else 0)
