"""mistral.rs 0.9.5 on CPU, asked for float32 (ModelDType.F32), rounds K and V to float16.

Position 0 of a prompt attends only to itself: its attention output is its own V, so only K and V's
precision (not the attention's arithmetic) separates engines there. Standalone: writes the zoo's
mistral-w5 with engines/models/make_models.py, asks mistral.rs (through its own venv) for the
log-probabilities after each prefix of a 6-token prompt, and compares them with transformers'
float64 forward, once as it is and once with K and V rounded to float16. Run with a venv that has
transformers and torch (the CTranslate2 one):

    $(bash engines/setup_env.sh ctranslate2) engines/mistralrs/repro_kv_float16.py

Exit 1 while mistral.rs matches float16 K/V at position 0 far better than float32 (the rounding is
present), 0 once its F32 K/V match the float32 forward."""
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
d, ids = sys.argv[1], json.loads(sys.argv[2])
r = mistralrs.Runner(which=mistralrs.Which.Plain(model_id=d, dtype=mistralrs.ModelDType.F32), token_source="none")
rows = []
for n in range(1, len(ids) + 1):
    req = mistralrs.ChatCompletionRequest(messages=[{"role": "user", "content": " ".join(f"<{t}>" for t in ids[:n])}],
                                          model="default", logprobs=True, top_logprobs=256, max_tokens=1, temperature=0.0)
    top = r.send_chat_completion_request(req).choices[0].logprobs.content[0].top_logprobs
    row = [0.0] * 256
    for t in top:
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
    ids = [34, 208, 61, 17, 120, 179]
    out = subprocess.run([mrs_python, "-c", RUN, model, json.dumps(ids)], capture_output=True, text=True, check=True).stdout
    got = np.array(json.loads(out.split("ROWS ", 1)[1]))

    def forward(kv_half):
        hf = transformers.AutoModelForCausalLM.from_pretrained(model, dtype=torch.float64, attn_implementation="eager")
        if kv_half:
            for layer in hf.model.layers:
                for proj in (layer.self_attn.k_proj, layer.self_attn.v_proj):
                    proj.register_forward_hook(lambda m, i, o: o.to(torch.float16).to(torch.float64))
        with torch.no_grad():
            return torch.log_softmax(hf(torch.tensor([ids])).logits[0], -1).numpy()

    f32, f16 = np.abs(got - forward(False)).max(1), np.abs(got - forward(True)).max(1)
print(f"transformers {transformers.__version__}; mistral.rs via {mrs_python}")
print("max |log-prob error| vs float64 forward, K/V as computed:", " ".join(f"{e:.2g}" for e in f32))
print("max |log-prob error| vs float64 forward, K/V float16:    ", " ".join(f"{e:.2g}" for e in f16))
bad = f16[0] < 1e-4 < f32[0]
print("BUG PRESENT: K and V are float16" if bad else "fixed: K and V are not rounded to float16")
sys.exit(1 if bad else 0)
