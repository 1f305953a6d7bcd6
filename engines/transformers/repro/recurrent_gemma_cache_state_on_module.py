"""recurrent_gemma's recurrent blocks keep their cache state on the module (RecurrentGemmaRecurrentBlock.conv1d_state,
RecurrentGemmaRglru.recurrent_states), not in the Cache object: a forward with a fresh cache of its own (what an
engine does for a new sequence) reuses the previous sequence's conv state, which a one-token step reads (its decode
branch). And that state is sized by hidden_size, not lru_width: where they differ, a one-token step raises. Runs a
random tiny model in float64: sequence A (3 tokens) with a fresh DynamicCache, then sequence B's first token alone
with another fresh DynamicCache, against B's token through a forward without a cache; then the same one-token step
on a model with lru_width != hidden_size. Exit 1 while either goes wrong (5.25.0: 1.84 off, and the RuntimeError).
4.x sets the module state up only in a multi-token prefill without a cache of its own: there the one-token step
raises a TypeError (conv1d_state None), exit 1 too. Only transformers and torch."""
import sys

import torch
import transformers
from transformers import DynamicCache, RecurrentGemmaConfig, RecurrentGemmaForCausalLM


def model(lru_width):
    torch.manual_seed(0)
    cfg = RecurrentGemmaConfig(num_hidden_layers=2, vocab_size=64, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                               attention_window_size=3, block_types=["recurrent", "attention"], lru_width=lru_width)
    m = RecurrentGemmaForCausalLM(cfg).eval().double()
    for p in m.parameters():
        torch.nn.init.normal_(p, std=0.3)
    return m


def step(m, tokens, start):
    n = len(tokens)
    kwargs = {"cache": DynamicCache(config=m.config)} if "cache" in m.forward.__code__.co_varnames else {
        "past_key_values": DynamicCache(config=m.config)}
    return m(torch.tensor([tokens]), use_cache=True, position_ids=torch.arange(start, start + n)[None],
             cache_position=torch.arange(start, start + n), **kwargs).logits[0]


bad = False
m = model(None)
with torch.no_grad():
    want = m(torch.tensor([[9]]), use_cache=False).logits[0]
    step(m, [5, 17, 33], 0)  # sequence A, its own cache
    got = step(m, [9], 0)  # sequence B's first token, a fresh cache
err = float((got - want).abs().max())
print(f"transformers {transformers.__version__}: a new sequence's first token after another sequence, with a fresh cache: "
      f"{err:.3g} from the forward without a cache")
bad |= err > 1e-9
try:
    with torch.no_grad():
        step(model(48), [9], 0)
    print("lru_width 48 beside hidden_size 32: a one-token step runs")
except RuntimeError as e:
    print(f"lru_width 48 beside hidden_size 32: a one-token step raises: {str(e).splitlines()[0]}")
    bad = True
sys.exit(1 if bad else 0)
