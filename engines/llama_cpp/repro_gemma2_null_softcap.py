"""llama.cpp (llama-cpp-python 0.3.36; the same code in build 11434): a Gemma 2 checkpoint whose
attn_logit_softcapping or final_logit_softcapping is null does not convert. transformers' Gemma2Config
takes None for both and then skips the cap; convert_hf_to_gguf's Gemma2Model.set_gguf_parameters
(conversion/gemma.py:97-102) writes both unconditionally and gguf-py packs None as a float32:
`struct.error: required argument is not a float`. (src/models/gemma2.cpp also sets attn_soft_cap
true whatever the file says.) Released Gemma 2 checkpoints have both caps. Exit 1 while the bug is there.
    python3 engines/models/make_models.py /tmp/zoo                    # gemma2-w4 has both caps
    python repro_gemma2_null_softcap.py /tmp/zoo/gemma2-w4 [LLAMA_SRC]   # torch, transformers, gguf-py's imports
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
src = sys.argv[2] if len(sys.argv) > 2 else os.path.expanduser("~/.cache/kvconform/llama-0.3.36/src")
with tempfile.TemporaryDirectory() as tmp:
    ckpt = os.path.join(tmp, "gemma2-no-caps")
    shutil.copytree(sys.argv[1], ckpt)
    with open(os.path.join(ckpt, "config.json")) as f:
        config = json.load(f)
    config["attn_logit_softcapping"] = config["final_logit_softcapping"] = None
    with open(os.path.join(ckpt, "config.json"), "w") as f:
        json.dump(config, f)
    # llama.cpp's own Gemma2Model class (convert.py only adds a no-tokenizer vocabulary)
    done = subprocess.run([sys.executable, os.path.join(here, "convert.py"), "--src", src, ckpt, os.path.join(tmp, "m.gguf")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    print(f"convert (caps null): exit {done.returncode}: {last}")
    sys.exit(1 if done.returncode else 0)
