"""A stand-in for transformers' own tests in ctest mutate_transformers_sample (golden/test_mutate_transformers.py):
the campaign's --upstream-tests part runs test files like these on each mutant. Written for kvconform, not
taken from transformers."""
import torch
from transformers import LlamaConfig
from transformers.cache_utils import DynamicSlidingWindowLayer
from transformers.masking_utils import create_sliding_window_causal_mask


def test_sliding_layer_mask_sizes_below_its_window():
    # two tokens in a window of four: not full, every stored key visible, no offset (a `>=` turned into `>`
    # in get_mask_sizes reaches this line and survives: the layer is not full either way)
    layer = DynamicSlidingWindowLayer(sliding_window=4)
    states = torch.zeros(1, 1, 2, 2)
    layer.update(states, states)
    assert layer.get_mask_sizes(1) == (3, 0)


def test_or_mask_function_widens_the_sliding_mask():
    # the first key is outside the last query's window of 2, but the or-mask lets it in (dropping the
    # builder's or_masks line loses it)
    config = LlamaConfig(sliding_window=2)
    config._attn_implementation = "sdpa"
    mask = create_sliding_window_causal_mask(config, torch.empty(1, 4, 1), None, None,
                                             or_mask_function=lambda b, h, q, kv: kv == 0)
    assert bool(mask[0, 0, 3, 0]) and not bool(mask[0, 0, 3, 1])
