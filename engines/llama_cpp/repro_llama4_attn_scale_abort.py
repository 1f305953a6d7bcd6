"""llama.cpp (llama-cpp-python 0.3.36; also llama.cpp b11434): a Llama 4 GGUF with fewer than 4 layers aborts on its
first llama_decode with GGML_ASSERT(buf != NULL && "tensor buffer not set") (ggml-backend.cpp, from
llm_graph_input_attn_temp::set_input, llama-graph.cpp). src/models/llama4.cpp always builds the temperature-tuning
input (build_inp_attn_scale) but multiplies Q by it only on NoPE layers, which it hard-codes as every 4th layer
(n_no_rope_layer_step 4; config.json's no_rope_layers / no_rope_layer_interval are never converted): with 1-3 layers
no node reads it, the scheduler gives it no buffer, and set_input writes into it anyway. The same checkpoint with 4
layers decodes. Exit 1 while the bug is there.
    for L in 1 4; do python3 engines/models/make_models.py --draw llama4_text:20250917:0 \
      | python3 -c "import json,sys; r=json.load(sys.stdin); r['config']['num_hidden_layers']=$L; r['folder']='l4-$L'; print(json.dumps(r))" \
      | python3 engines/models/make_models.py /tmp/zoo --recipe -         # a MoE on every layer, attention_chunk_size 5
      python engines/llama_cpp/convert.py /tmp/zoo/l4-$L /tmp/l4-$L.gguf; done  # llama.cpp's own converter classes
    python repro_llama4_attn_scale_abort.py /tmp/l4-1.gguf /tmp/l4-4.gguf"""
import subprocess
import sys

CHILD = r"""
import sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, logits_all=True, verbose=False)
llm.eval([5])
print(f"n_layer {llm.metadata['llama4.block_count']}: decoded 1 token")
"""

aborted = False
for path in sys.argv[1:]:
    p = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True)
    why = next((l.strip() for l in p.stderr.splitlines() if "GGML_ASSERT" in l), p.stdout.strip())
    print(f"{path}: exit {p.returncode}: {why}")
    aborted |= p.returncode != 0
sys.exit(1 if aborted else 0)
