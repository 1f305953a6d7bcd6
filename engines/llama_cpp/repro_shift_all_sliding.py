"""llama.cpp (llama-cpp-python 0.3.36; the same in b11434): a context shift of a model whose every layer
slides aborts at the next decode with GGML_ASSERT(buffer) (ggml-backend.cpp:205, in
llama_context::memory_update's K-shift). The iSWA cache's full-attention half has no layer, so the
shift graph it builds for that half has tensors with no buffer. A model with one full layer shifts
fine (the fixed shift plans pass on gemma2-w4). An abort, not an error. Exit 1 while the bug is there.
    python3 engines/models/make_models.py --draw gemma2:20250917:0 | python3 -c "import json,sys; r=json.load(sys.stdin); \\
      r['config'].update(num_hidden_layers=2, layer_types=['sliding_attention'] * 2, sliding_window=4); \\
      r['folder']='g2-allsliding'; print(json.dumps(r))" | python3 engines/models/make_models.py /tmp/zoo --recipe -
    python engines/llama_cpp/convert.py /tmp/zoo/g2-allsliding /tmp/g2.gguf   # llama.cpp's own converter classes
    python repro_shift_all_sliding.py /tmp/g2.gguf"""
import subprocess
import sys

CHILD = r"""
import sys
import llama_cpp
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=64, n_threads=1, logits_all=True, verbose=False)
llm.eval([5, 6, 7, 8, 9, 10, 11])                    # 7 tokens, past the window of 4
mem = llama_cpp.llama_get_memory(llm.ctx)
print("can shift:", llama_cpp.llama_memory_can_shift(mem))
llama_cpp.llama_memory_seq_rm(mem, 0, 1, 4)           # discard positions 1..3, keep 0
llama_cpp.llama_memory_seq_add(mem, 0, 4, -1, -3)     # move positions 4..6 down to 1..3 (the K-shift)
llm.n_tokens = 4
llm.eval([12])                                        # the next decode applies the K-shift
print("shifted and decoded 1 token")
"""
p = subprocess.run([sys.executable, "-c", CHILD, sys.argv[1]], capture_output=True, text=True)
why = next((l.strip() for l in p.stderr.splitlines() if "GGML_ASSERT" in l), (p.stdout + p.stderr).strip()[-300:])
print(f"{sys.argv[1]}: exit {p.returncode}: {why}")
sys.exit(1 if p.returncode != 0 else 0)
