"""transformers 4.57.6: a T5Gemma checkpoint saved untied (T5GemmaConfig tie_word_embeddings=False) whose decoder
config keeps its own default tie_word_embeddings=True loads with lm_head.out_proj set to the *encoder's* embedding
table (get_input_embeddings), not the checkpoint's lm_head.out_proj.weight; 4.56.2 and 5.x load the checkpoint's head.
Exit 1 while the bug is there. Only transformers and torch."""
import sys
import tempfile
import torch
from transformers import T5GemmaConfig, T5GemmaForConditionalGeneration, __version__

torch.manual_seed(0)
stack = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
             num_key_value_heads=1, head_dim=16, sliding_window=4)
cfg = T5GemmaConfig(encoder=dict(stack), decoder=dict(stack), tie_word_embeddings=False, vocab_size=64)
model = T5GemmaForConditionalGeneration(cfg).eval()
with torch.no_grad():
    for p in model.parameters():
        p.normal_()
    model.lm_head.out_proj.weight = torch.nn.Parameter(torch.randn(64, 32))  # a head of its own (4.57.6 shares one)
saved = model.lm_head.out_proj.weight.detach().clone()
with tempfile.TemporaryDirectory() as d:
    model.save_pretrained(d)
    loaded = T5GemmaForConditionalGeneration.from_pretrained(d).eval()
head = loaded.lm_head.out_proj.weight
encoder = torch.equal(head, loaded.model.encoder.embed_tokens.weight)
ok = torch.equal(head, saved)
print(f"transformers {__version__}: lm_head.out_proj is the checkpoint's: {ok}; is the encoder's embedding: {encoder}")
sys.exit(0 if ok else 1)
