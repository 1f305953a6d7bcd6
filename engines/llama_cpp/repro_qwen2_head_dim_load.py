"""llama.cpp (llama-cpp-python 0.3.36): llama_model_load_from_file refuses GGUFs of configs transformers runs. Each
GGUF given is loaded and llama.cpp's reason printed; exit 1 if any is refused. The causes (NOTES.md, finding 6):
  head_dim * num_attention_heads != hidden_size: src/models/qwen2.cpp, phi3.cpp, olmo2.cpp size attn_q / attn_output
      by n_embd, exaone4.cpp attn_output; conversion/granite.py drops head_dim (then n_embd_head = n_embd / n_head)
  tie_word_embeddings true: src/models/openai-moe.cpp (gpt-oss) requires output.weight, with no token_embd fallback
  attention_bias true: src/models/smollm3.cpp and olmo2.cpp create no bias tensors ("wrong number of tensors")
    for f in qwen2:20250917:0 gpt_oss:20250917:0 smollm3:20250917:1; do    # 2 heads x 16, tied, attention_bias
      python3 engines/models/make_models.py --draw $f | python3 engines/models/make_models.py /tmp/zoo --recipe -; done
    for m in qwen2 gptoss smollm3; do i=$([ $m = smollm3 ] && echo 1 || echo 0)
      python engines/llama_cpp/convert.py /tmp/zoo/draw-$m-20250917-$i /tmp/$m.gguf; done
    python repro_qwen2_head_dim_load.py /tmp/qwen2.gguf /tmp/gptoss.gguf /tmp/smollm3.gguf"""
import ctypes
import sys

import llama_cpp

log = []


@llama_cpp.llama_log_callback
def keep(level, text, user_data):
    log.append(text.decode(errors="replace"))


llama_cpp.llama_log_set(keep, ctypes.c_void_p())
llama_cpp.llama_backend_init()
refused = 0
for path in sys.argv[1:]:
    log.clear()
    model = llama_cpp.llama_model_load_from_file(path.encode(), llama_cpp.llama_model_default_params())
    if model:
        print(f"{path}: loaded")
        llama_cpp.llama_model_free(model)
        continue
    refused += 1
    why = [l.strip() for l in log if "error loading model" in l or "wrong" in l or "missing" in l]
    print(f"{path}: refused: {why[0] if why else ''.join(log[-3:]).strip()}")
sys.exit(1 if refused else 0)
