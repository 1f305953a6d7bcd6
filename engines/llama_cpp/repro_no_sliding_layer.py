"""llama.cpp (llama-cpp-python 0.3.36; the same in build 11434 and its llama-server): a Gemma 4 or Gemma 2 GGUF whose
layers are all full attention aborts in llama_init_from_model with GGML_ASSERT(hparams.is_swa_any()) (src/llama-model.cpp,
create_memory): src/models/gemma4.cpp and gemma2.cpp set swa_type STANDARD whatever the sliding_window_pattern array
says, so the iSWA cache is built for a model with no sliding layer. An abort, not a load error. Exit 1 while the bug is there.
    python3 engines/models/make_models.py --draw gemma4_text:20250917:1 | python3 -c "import json,sys; r=json.load(sys.stdin); \\
      r['config'].update(num_hidden_layers=1, layer_types=['full_attention'], num_kv_shared_layers=0); r['folder']='g4-full1'; \\
      print(json.dumps(r))" | python3 engines/models/make_models.py /tmp/zoo --recipe -
    python3 engines/models/make_models.py --draw gemma2:20250917:0 | python3 -c "import json,sys; r=json.load(sys.stdin); \\
      r['config'].update(num_hidden_layers=1, layer_types=['full_attention'], tie_word_embeddings=True); r['folder']='g2-full1'; \\
      print(json.dumps(r))" | python3 engines/models/make_models.py /tmp/zoo --recipe -
    python engines/llama_cpp/convert.py /tmp/zoo/g4-full1 /tmp/g4.gguf   # llama.cpp's own converter classes (+ convert.py's fixes)
    python repro_no_sliding_layer.py /tmp/g4.gguf                        # and the same for g2-full1"""
import subprocess
import sys

CHILD = r"""
import sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, logits_all=True, verbose=False)
llm.eval([5])
print("context made, decoded 1 token")
"""
p = subprocess.run([sys.executable, "-c", CHILD, sys.argv[1]], capture_output=True, text=True)
why = next((l.strip() for l in p.stderr.splitlines() if "GGML_ASSERT" in l), p.stdout.strip())
print(f"{sys.argv[1]}: exit {p.returncode}: {why}")
sys.exit(1 if p.returncode != 0 else 0)
