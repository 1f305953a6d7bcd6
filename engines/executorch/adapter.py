#!/usr/bin/env python3
"""kvconform engine worker for ExecuTorch through optimum-executorch (docs/engines.md, "The engine protocol").

Run it with the engine's venv: `$(bash engines/setup_env.sh executorch) engines/executorch/adapter.py`.

The engine under test is what `optimum-cli export executorch --task text-generation --recipe xnnpack
--use_custom_sdpa --use_custom_kv_cache` builds, driven token by token:
  * load: optimum.exporters.executorch.tasks.causal_lm.load_causal_lm_model(dir, config=..., dtype float32,
    use_custom_sdpa, use_custom_kv_cache, cache_implementation "hybrid" for configs with layer_types
    (Gemma-style; "static" otherwise, as optimum-executorch picks), max_seq_len = max_tokens), then what
    CausalLMExportableModule.export() does before torch.export: TorchExportableModuleForDecoderOnlyLM(model),
    _register_custom_attention (attn "custom_sdpa_ring_kv_cache"), replace_with_et_custom_kv_cache: sliding
    layers get ExecuTorch's CustomRingKVCache (2 x window slots, cache_positions_manager), full layers
    CustomKVCache; attention is torch.ops.llama.custom_sdpa;
  * mode "eager" (default): that module's forward(input_ids, cache_position) run in eager PyTorch;
    mode "pte": CausalLMExportableModule.export() (torch.export, with optimum-executorch's dynamic
    sequence dim, max = min(max_seq_len, sliding_window) - 1), lowered with the xnnpack recipe to a .pte,
    run by executorch.runtime (Runtime.get().load_program(...).load_method("forward"));
  * extend: forward(input_ids [1, n], cache_position arange(len, len + n)) in chunks of `chunk` tokens
    (default: the exported graph's maximum, min(max_seq_len, W) - 1, in both modes, as a runner must; a
    longer chunk trips CustomRingKVCache.update's assert past 2W tokens); logits [1, n, vocab] float32;
  * one sequence only (the ring cache lives in the module, the sdpa hook is bound to one module):
    no "sequences"; rollback and reload: no API in ExecuTorch's LLM runner or module (unsupported);
    reset: a fresh module (eager) or a fresh method load (pte).

Options (any other key is refused by name):
  mode   "eager" (default) | "pte"
  chunk  int >= 1: feed each extend in chunks of this many tokens

Mutants rewrite the config before the model is built: window_off_by_one+1 / window_off_by_one-1 change sliding_window; full sets
layer_types to all full_attention where the config has it, else sliding_window = None.
"""
import contextlib
import logging
import os
import sys
import tempfile

from kvconform import Engine, Unsupported, mutate_hf_config, serve_engine

with contextlib.redirect_stdout(sys.stderr):
    import numpy as np
    import torch
    import transformers
    from executorch.version import __version__ as et_version
    import optimum.exporters.executorch.convert  # noqa: F401  (registers attn "custom_sdpa", as optimum-cli does)
    from optimum.exporters.executorch.tasks.causal_lm import load_causal_lm_model
    from transformers import AutoConfig
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM
    from optimum.executorch.attentions.custom_kv_cache import replace_with_et_custom_kv_cache
    try:
        from importlib.metadata import version as _pkg_version
        oe_version = _pkg_version("optimum-executorch")
    except Exception:  # pragma: no cover
        oe_version = "?"

logging.disable(logging.WARNING)
OPTIONS = {"mode": ("eager", "pte"), "chunk": None}


def log(*a):
    print("[executorch]", *a, file=sys.stderr, flush=True)


class ExecutorchEngine(Engine):
    name = "executorch"
    version = f"{et_version} (optimum-executorch {oe_version}, torch {torch.__version__}, transformers {transformers.__version__})"
    description = ("ExecuTorch via optimum-executorch: custom_sdpa + ET custom KV caches (CustomRingKVCache on sliding "
                   "layers), eager module or exported .pte (xnnpack) through executorch.runtime; options mode=eager|pte, chunk=N")
    operations = ()

    def __init__(self):
        self.mod = None

    def load(self, model_dir, options, mutant, max_tokens, sequences):
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(unknown)} (executorch options: {', '.join(OPTIONS)})")
        o = {"mode": "eager", "chunk": None}
        o.update(options)
        if o["mode"] not in OPTIONS["mode"]:
            raise ValueError(f"option mode={o['mode']!r}: expected one of {OPTIONS['mode']}")
        if o["chunk"] is not None and (not isinstance(o["chunk"], int) or isinstance(o["chunk"], bool) or o["chunk"] < 1):
            raise ValueError(f"option chunk={o['chunk']!r}: expected an integer >= 1")
        if int(sequences or 1) > 1:
            raise Unsupported("one sequence per module (the ring cache and the custom sdpa hook belong to one module)")
        self.o, self.mod, self.method = o, None, None
        try:
            cfg = AutoConfig.from_pretrained(model_dir)
        except ValueError as e:  # a family newer than the transformers optimum-executorch pins: a refusal
            if "does not recognize this architecture" not in str(e):
                raise
            raise Unsupported(str(e).split(". ")[0]) from None
        mutate_hf_config(cfg, mutant)
        # Llama 4's text config has no sliding_window attribute at all (its local layers are chunked)
        window = getattr(cfg, "sliding_window", None)
        hybrid = getattr(cfg, "layer_types", None) is not None and window is not None
        self.max_len = max(int(max_tokens or 0), 8)
        self.cfg, self.model_dir = cfg, model_dir
        with contextlib.redirect_stdout(sys.stderr):
            self.wrapper = load_causal_lm_model(model_dir, config=cfg, dtype="float32", use_custom_sdpa=True,
                                                use_custom_kv_cache=True, max_seq_len=self.max_len,
                                                cache_implementation="hybrid" if hybrid else "static")
        self.vocab = int(cfg.vocab_size)
        # optimum-executorch's export: dynamic sequence dim max = min(max_seq_len, sliding_window) - 1
        self.max_chunk = max(min(self.max_len, window or (1 << 30)) - 1, 1)
        if o["mode"] == "pte":
            self._export_pte()
        self.reset()
        return self.vocab

    # ---- eager ------------------------------------------------------------------------------------
    def _eager_module(self):
        w = self.wrapper
        m = TorchExportableModuleForDecoderOnlyLM(w.model)
        w._register_custom_attention(m)
        replace_with_et_custom_kv_cache(m.model, w.model.config, w.model.generation_config, w.model.dtype)
        return m

    # ---- pte ----------------------------------------------------------------------------------------
    def _export_pte(self):
        from executorch.runtime import Runtime
        from optimum.exporters.executorch.convert import export_to_executorch
        self.tmp = tempfile.mkdtemp(prefix="kvc-et-")
        with contextlib.redirect_stdout(sys.stderr):
            export_to_executorch(self.wrapper, task="text-generation", recipe="xnnpack", output_dir=self.tmp)
        pte = os.path.join(self.tmp, "model.pte")
        if not os.path.exists(pte):
            raise RuntimeError(f"no model.pte in {os.listdir(self.tmp)}")
        self.program = Runtime.get().load_program(pte)
        log(f"exported {pte} ({os.path.getsize(pte)} bytes); dynamic sequence dim max {self.max_chunk}")

    def reset(self):
        if self.o["mode"] == "eager":
            self.mod = self._eager_module()
        else:
            self.method = self.program.load_method("forward")
        self.n = 0

    def extend(self, seq, tokens):
        if seq != 0:
            raise Unsupported("one sequence per module")
        step = self.o["chunk"] or self.max_chunk
        out = []
        for i in range(0, len(tokens), step):
            part = tokens[i:i + step]
            ids = torch.tensor([part], dtype=torch.long)
            pos = torch.arange(self.n, self.n + len(part), dtype=torch.long)
            with torch.no_grad():
                if self.o["mode"] == "eager":
                    logits = self.mod(input_ids=ids, cache_position=pos)
                else:
                    logits = self.method.execute([ids, pos])[0]
            logits = logits.to(torch.float32)
            if logits.shape[-2] != len(part):
                raise RuntimeError(f"forward returned logits of shape {tuple(logits.shape)} for {len(part)} tokens")
            out.append(logits.reshape(len(part), self.vocab).numpy())
            self.n += len(part)
        return np.ascontiguousarray(np.concatenate(out, 0), dtype="<f4").tobytes()


if __name__ == "__main__":
    serve_engine(ExecutorchEngine())
