"""mistral.rs 0.9.5: a prompt that extends a cached one by more than one token, once the cached part
is longer than the sliding window, gets wrong log-probabilities from the prefix cache; the same prompt
with the prefix cache off (prefix_cache_n=0) gets transformers' values.

Standalone: writes the zoo's mistral-w5 (every layer sliding, window 5) with
engines/models/make_models.py; in mistral.rs (through its own venv) asks for the log-probabilities
after a 6-token prompt, then after the same prompt and 2 more tokens (the prefix cache serves the
first 6), with the prefix cache on and off; compares each with transformers' float64 forward. Run
with a venv that has transformers and torch (the CTranslate2 one):

    $(bash engines/setup_env.sh ctranslate2) engines/mistralrs/repro_prefix_cache_past_window.py

Exit 1 while the cached answer is wrong and the uncached one right, 0 once fixed."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = r'''
import json, sys, mistralrs
d, n, prompts = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
r = mistralrs.Runner(which=mistralrs.Which.Plain(model_id=d, dtype=mistralrs.ModelDType.F32), token_source="none",
                     prefix_cache_n=n)
rows = []
for ids in prompts:
    req = mistralrs.ChatCompletionRequest(messages=[{"role": "user", "content": " ".join(f"<{t}>" for t in ids)}],
                                          model="default", logprobs=True, top_logprobs=256, max_tokens=1, temperature=0.0)
    row = [0.0] * 256
    for t in r.send_chat_completion_request(req).choices[0].logprobs.content[0].top_logprobs:
        row[int(t.token)] = t.logprob
    rows.append(row)
print("ROWS " + json.dumps(rows))
'''
mrs_python = subprocess.run(["bash", os.path.join(HERE, "..", "setup_env.sh"), "--check", "mistralrs"], check=True,
                            capture_output=True, text=True).stdout.strip()
with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([sys.executable, os.path.join(HERE, "..", "models", "make_models.py"), tmp, "--only", "mistral-w5"],
                   check=True, stdout=subprocess.DEVNULL)
    model = os.path.join(tmp, "mistral-w5")
    ids = [86, 251, 98, 123, 72, 147, 239, 38]
    prompts = [ids[:6], ids]

    def mistralrs(n):
        out = subprocess.run([mrs_python, "-c", RUN, model, str(n), json.dumps(prompts)], capture_output=True, text=True,
                             check=True).stdout
        return np.array(json.loads(out.split("ROWS ", 1)[1]))

    cached, fresh = mistralrs(16), mistralrs(0)
    hf = transformers.AutoModelForCausalLM.from_pretrained(model, dtype=torch.float64, attn_implementation="eager")
    with torch.no_grad():
        ref = torch.log_softmax(hf(torch.tensor([ids])).logits[0], -1).numpy()
e_cached = np.abs(cached[1] - ref[7]).max()
e_fresh = np.abs(fresh[1] - ref[7]).max()
print(f"transformers {transformers.__version__}; mistral.rs via {mrs_python}; sliding_window 5, every layer sliding")
print(f"after 6 tokens (nothing cached): max |log-prob error| {np.abs(cached[0] - ref[5]).max():.3g}")
print(f"after 8 tokens, the first 6 from the prefix cache: {e_cached:.3g}")
print(f"after 8 tokens, prefix cache off:                  {e_fresh:.3g}")
print("(K and V are float16 in mistral.rs: errors up to a few 1e-2 are that rounding)")
bad = e_cached > 0.5 and e_fresh < 0.1
print("BUG PRESENT: the prefix cache's continuation past the window is wrong" if bad else "fixed")
sys.exit(1 if bad else 0)
