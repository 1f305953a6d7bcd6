"""recurrent_gemma's attention layers are local (attention_window_size keys), but transformers 4.x applies the window
only through its cache: RecurrentGemmaModel._update_causal_mask masks the future and nothing else, and the attention's
ring of attention_window_size keys (_update_cache) is what windows a cached decode. So a no-cache forward
(use_cache=False) of more than attention_window_size tokens attends every earlier key, and a cached one differs from
it; a cached prefill longer than the window keeps only its last keys for every query, and a decode rolls the ring one
position early (at position W - 1 the first key is dropped and an empty slot seen) for two positions. 5.x
(create_sliding_window_causal_mask) windows the no-cache forward: the query at p sees p - W < j <= p. Runs a random
tiny model in float64, window 3, 9 tokens: the mask rows of the no-cache forward, and the largest |logit difference|
per position of (a) the no-cache forward and (b) a cached prefill of 2 tokens then decode, each against (c) the no-cache
forward with the window's mask put in place. Exit 1 while (a) is not (c) (4.x); 5.x has no _update_causal_mask and its
no-cache forward is the windowed one. Only transformers and torch."""
import sys

import torch
import transformers
from transformers import RecurrentGemmaConfig, RecurrentGemmaForCausalLM

W, N = 3, 9
torch.manual_seed(0)
cfg = RecurrentGemmaConfig(num_hidden_layers=2, vocab_size=64, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                           attention_window_size=W, block_types=["recurrent", "attention"])
model = RecurrentGemmaForCausalLM(cfg).eval().double()
for p in model.parameters():
    torch.nn.init.normal_(p, std=0.3)
x = torch.randint(0, 64, (1, N))
cls = type(model.model)
if not hasattr(cls, "_update_causal_mask"):
    print(f"transformers {transformers.__version__}: the no-cache forward builds its mask with the window "
          "(create_sliding_window_causal_mask)")
    sys.exit(0)
rows = (cls._update_causal_mask(model.model, None, torch.zeros(1, N, 32, dtype=torch.float64), torch.arange(N))[0, 0] == 0)
print(f"transformers {transformers.__version__}: the no-cache forward's mask rows {rows.int().tolist()}")
with torch.no_grad():
    nocache = model(x, use_cache=False).logits[0]
    steps = [model(x[:, :2], use_cache=True, cache_position=torch.arange(2)).logits[0]]
    for p in range(2, N):
        steps.append(model(x[:, p:p + 1], use_cache=True, cache_position=torch.tensor([p]),
                           position_ids=torch.tensor([[p]])).logits[0])
    cached = torch.cat(steps)

    def windowed(self, attention_mask, inputs, cache_position):
        i, j = torch.arange(inputs.shape[1])[:, None], torch.arange(inputs.shape[1])[None]
        seen = (j <= i) & (j > i - W)
        return torch.zeros(seen.shape, dtype=inputs.dtype).masked_fill(~seen, torch.finfo(inputs.dtype).min)[None, None]

    cls._update_causal_mask = windowed
    window = model(x, use_cache=False).logits[0]
for name, got in (("no-cache", nocache), ("cached", cached)):
    print(f"{name} forward vs the window of {W}, per position: "
          f"{[float('%.3g' % (got[p] - window[p]).abs().max()) for p in range(N)]}")
sys.exit(1 if (nocache - window).abs().max() > 1e-9 else 0)
