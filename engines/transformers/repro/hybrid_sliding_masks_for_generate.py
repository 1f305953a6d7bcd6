"""create_masks_for_generate gives inkling2's `hybrid_sliding` layers (a sliding attention beside a
linear-attention branch) a plain causal mask in transformers 5.24.0: masking_utils'
LAYER_PATTERN_TO_MASK_FUNCTION_MAPPING maps "hybrid_sliding" to {"sliding_attention":
create_causal_mask, ...}, so the mask keyed "sliding_attention" ignores the window. 5.25.0 maps it to
create_sliding_window_causal_mask: fixed there. Inkling2's own forward builds its masks itself and
slides in both releases; the generate path that takes the mask dict precomputed does not. Prints the
sliding mask's rows (window 2, 5 tokens); exit 1 while a row sees a key outside the window. Only
transformers and torch."""
import sys
import torch
import transformers
from transformers import masking_utils
from transformers.models.inkling2.configuration_inkling2 import Inkling2TextConfig

W, N = 2, 5
cfg = Inkling2TextConfig(num_hidden_layers=2, layer_types=["hybrid_sliding", "hybrid"], sliding_window=W)
cfg._attn_implementation = "eager"
masks = masking_utils.create_masks_for_generate(cfg, torch.zeros(1, N, 8), torch.ones(1, N, dtype=torch.long), None,
                                                torch.arange(N)[None])
m = masks["sliding_attention"][0, 0]
rows = (m == 0).int().tolist() if m.dtype != torch.bool else m.int().tolist()  # eager: 0 where visible
want = [[int(q - W < k <= q) for k in range(N)] for q in range(N)]
print(f"transformers {transformers.__version__}: the hybrid_sliding layers' mask rows {rows}")
if rows != want:
    print(f"not the window of {W}: expected {want}")
    sys.exit(1)
