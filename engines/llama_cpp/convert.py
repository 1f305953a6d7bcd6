#!/usr/bin/env python3
"""Converts one of kvconform's tiny Hugging Face checkpoints (engines/models) to a GGUF for llama.cpp.

    python engines/llama_cpp/convert.py MODEL_DIR OUT.gguf [--src LLAMA_SRC] [--no-fold-query-scale]

It reuses the model classes of the convert_hf_to_gguf.py vendored in the pinned llama.cpp source
(unpacked by engines/llama_cpp/build_llama.sh into ${KVC_CACHE:-~/.cache/kvconform}/
llama-0.3.36/src, or --src / $KVC_LLAMA_SRC: llama-11434/src for the second version), so llama.cpp's own tensor transforms apply (Gemma's
norm weight + 1, Llama's q/k rope permutation, ...). Only these things differ from that script:

* no tokenizer: the checkpoints have none and the engine is fed token ids, so the GGUF says
  tokenizer model "none" with `<arch>.vocab_size` (llama.cpp then adds that many dummy tokens);
* the per-layer sliding pattern is written from config.layer_types as a bool array
  (`<arch>.attention.sliding_window_pattern`, chunked layers counted as windowed) wherever the vendored
  class leaves it out (Gemma 2/3, Cohere2, gpt-oss, Llama 4; Gemma 4, OLMo 3 and granite_swa write their
  own): llama.cpp would otherwise derive a default period (Gemma 2: every other layer, Gemma 3: 5
  sliding : 1 full, Cohere2: 3 : 1), which is wrong for gemma3-irregular-w4 and any irregular layer_types;
* Gemma 3 and 4 keep their whole token_embd (the vendored class trims it to tokenizer.json's size);
* Cohere2 without `rotary_pct` (a key transformers' Cohere2Config does not have; the vendored class
  reads it unconditionally) gets 1.0, the whole head as transformers rotates it;
* query_pre_attn_scalar (Gemma 2 and 3): llama.cpp ignores it (it scales queries by
  1/sqrt(head_dim), or 1/sqrt(n_embd/n_head) for the 27B sizes only). Unless --no-fold-query-scale,
  when the two differ the ratio is folded into q_proj (Gemma 2: exact, RoPE is linear and there is
  no q-norm) or into q_norm's weight (Gemma 3, whose q-norm comes after q_proj), so the GGUF
  computes what transformers computes; the GGUF records the factor under
  kvconform.query_scale_folded. gemma2-w4 needs it (query_pre_attn_scalar 32, head_dim 16).

The note on stderr also says when an untied lm_head is not converted (Gemma 2's class drops it and
llama.cpp's gemma2 reads token_embd as the head) and when the GGUF has no sliding window key.

Mistral: the vendored script maps MistralForCausalLM to the plain `llama` architecture, which has no
sliding window in llama.cpp; the GGUF is written as that script writes it (a finding, not hidden):
the engine runs every layer as full attention. kvconform.* keys record the checkpoint's window and
layer types for the worker.

Needs numpy, torch, transformers (AutoConfig), pyyaml and tqdm (gguf-py's own imports); sentencepiece
is not needed (no tokenizer).
"""
import argparse
import json
import math
import os
import sys
from pathlib import Path

VERSION = "0.3.36"


def hand_off():
    """KVC_ZYGOTE=1 (scripts/test.sh): the conversion runs in a fork server's child that imported torch
    and transformers once (python/kvconform/zygote.py; about 3 s of CPU a start), as a run of its own
    would. A copy of this file without the checkout's python/ folder two levels up runs itself."""
    package = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "python")
    if os.path.isfile(os.path.join(package, "kvconform", "zygote.py")):
        sys.path.append(package)
        from kvconform.zygote import hand_off as zygote_hand_off
        zygote_hand_off(("torch", "transformers"))


def default_src():
    cache = os.environ.get("KVC_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "kvconform")
    return os.path.join(cache, f"llama-{VERSION}", "src")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--src", default=os.environ.get("KVC_LLAMA_SRC") or default_src(),
                    help="the sdist's vendor/llama.cpp, unpacked (build_llama.sh leaves it in the cache)")
    ap.add_argument("--no-fold-query-scale", action="store_true",
                    help="write Gemma 2 as the vendored script does (llama.cpp then ignores query_pre_attn_scalar)")
    ap.add_argument("--no-layer-types", action="store_true",
                    help="leave the sliding pattern out as the vendored script does (llama.cpp derives its default)")
    ap.add_argument("--byte-vocab", action="store_true",
                    help="a vocabulary of vocab_size ASCII pieces instead of none (llama-server needs pieces)")
    args = ap.parse_args(argv)

    src = Path(args.src)
    # build_llama.sh's cache is llama-VERSION/src: the GGUF names the source whose converter wrote it.
    cached = src.resolve().parent.name
    source = f"llama.cpp {cached[len('llama-'):]}" if cached.startswith("llama-") else f"llama.cpp source {src.name}"
    if not (src / "convert_hf_to_gguf.py").is_file():
        sys.exit(f"convert.py: no convert_hf_to_gguf.py in {src}: run engines/llama_cpp/build_llama.sh first")
    sys.path.insert(0, str(src / "gguf-py"))
    sys.path.insert(0, str(src))
    os.environ.pop("NO_LOCAL_GGUF", None)
    hand_off()

    import torch
    import gguf
    from conversion import ModelBase, ModelType, get_model_architecture, get_model_class
    from conversion.base import TextModel

    dir_model = Path(args.model_dir)
    cfg = json.loads((dir_model / "config.json").read_text())
    hparams = ModelBase.load_hparams(dir_model, False)
    arch = get_model_architecture(hparams, ModelType.TEXT)
    try:
        base = get_model_class(arch, mmproj=False)
    except NotImplementedError as e:  # exit 3: this llama.cpp version converts no such architecture
        print(f"convert.py: {e}", file=sys.stderr)
        return 3
    layer_types = cfg.get("layer_types")
    model_type = cfg.get("model_type", "")
    # llama.cpp ignores query_pre_attn_scalar: it scales queries by 1/sqrt(head_dim), or by
    # 1/sqrt(n_embd/n_head) for the sizes it knows as 27B (Gemma 2: 46 layers, Gemma 3: 62 layers).
    fold = None
    if model_type in ("gemma2", "gemma3_text", "gemma3") and not args.no_fold_query_scale:
        qpas = float(cfg.get("query_pre_attn_scalar") or cfg["head_dim"])
        used = float(cfg["head_dim"])
        if cfg["num_hidden_layers"] == (46 if model_type == "gemma2" else 62):
            used = cfg["hidden_size"] / cfg["num_attention_heads"]
        if qpas != used:
            fold = math.sqrt(used / qpas)  # 1/sqrt(used) * fold = 1/sqrt(qpas)

    class NoTokenizer(base):
        model_arch = base.model_arch

        def set_vocab(self):
            if args.byte_vocab:
                # llama-server prints each token's piece (n_probs), which a vocabulary of type "none"
                # aborts on: an SPM vocabulary of the same size names every id "<0xNN>" (the texts
                # llama.cpp looks its newline up by), as normal tokens, so that every piece is ASCII
                # (a byte piece of a byte >= 0x80 is held back as incomplete UTF-8, and its
                # probabilities with it); the ids the engine is fed, and the arithmetic, are unchanged.
                n = int(self.hparams["vocab_size"])
                w = self.gguf_writer
                w.add_tokenizer_model("llama")
                w.add_token_list([f"<0x{i:02X}>" if i < 256 else f"[kvc{i}]" for i in range(n)])
                w.add_token_scores([0.0] * n)
                w.add_token_types([gguf.TokenType.NORMAL] * n)
                w.add_add_bos_token(False)
                w.add_add_eos_token(False)
                return
            self.gguf_writer.add_tokenizer_model("none")
            if not any(gguf.Keys.LLM.VOCAB_SIZE.format(arch=self.gguf_writer.arch) in kv
                       for kv in self.gguf_writer.kv_data):  # some set_gguf_parameters write it too
                self.gguf_writer.add_vocab_size(self.hparams["vocab_size"])

        def set_gguf_parameters(self):
            if model_type == "cohere2" and "rotary_pct" not in self.hparams:
                # The vendored Cohere2 class reads hparams["rotary_pct"], a key transformers' Cohere2Config
                # does not have (its rope covers the whole head): 1.0 is what transformers computes.
                self.hparams["rotary_pct"] = 1.0
            super().set_gguf_parameters()
            w = self.gguf_writer
            # Gemma 2/3, Cohere2, gpt-oss, Llama 4, OLMo 3...: the vendored classes leave the pattern out (Gemma 4 and
            # granite_swa write it) and llama.cpp derives a default period, which config.layer_types may not follow.
            pattern_key = gguf.Keys.Attention.SLIDING_WINDOW_PATTERN.format(arch=w.arch)
            if layer_types and not args.no_layer_types and not any(pattern_key in kv for kv in w.kv_data):
                w.add_sliding_window_pattern([t in ("sliding_attention", "chunked_attention") for t in layer_types])
            if self.hparams.get("sliding_window") is not None:
                w.add_uint32("kvconform.sliding_window", int(self.hparams["sliding_window"]))
            if layer_types:
                w.add_array("kvconform.layer_types", list(layer_types))
            w.add_string("kvconform.source", f"engines/llama_cpp/convert.py, {source}")
            if fold is not None:
                w.add_float32("kvconform.query_scale_folded", fold)

        def modify_tensors(self, data_torch, name, bid):
            # Gemma 3 (and Gemma 4, its subclass) trims token_embd to the tokenizer's vocabulary, which
            # these checkpoints lack.
            if "embed_tokens.weight" in name and model_type.startswith(("gemma3", "gemma4")):
                yield from TextModel.modify_tensors(self, data_torch, name, bid)
                return
            if fold is not None:
                # Gemma 3 normalises q per head (q_norm) after q_proj: the factor goes into the norm's
                # weight (HF multiplies by 1 + w; the base class adds the 1). Gemma 2 has no q_norm.
                if model_type == "gemma2" and name.endswith("self_attn.q_proj.weight"):
                    data_torch = data_torch * fold
                elif model_type != "gemma2" and name.endswith("self_attn.q_norm.weight"):
                    data_torch = (data_torch + 1) * fold - 1
            yield from super().modify_tensors(data_torch, name, bid)

    NoTokenizer.__name__ = base.__name__
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    try:
        with torch.inference_mode():
            # The byte vocabulary has none of a real tokenizer's special tokens, and llama.cpp's vocabulary
            # loader keys some lookups on general.name (a name containing "phi3" looks up "</s>" and
            # aborts the load with unordered_map::at): that GGUF gets a name no such rule matches.
            name = "kvconform-byte-vocab" if args.byte_vocab else dir_model.name
            m = NoTokenizer(dir_model, gguf.LlamaFileType.ALL_F32, tmp, model_name=name)
            m.write()
        untied_dropped = cfg.get("tie_word_embeddings") is False and \
            "output.weight" not in {t.name for t in gguf.GGUFReader(tmp).tensors}
        os.replace(tmp, out)
    finally:  # a converter that raised leaves no partial GGUF in the cache
        tmp.unlink(missing_ok=True)
    note = f"{dir_model.name}: {arch} -> {m.model_arch.name.lower()}"
    if fold is not None:
        note += f", query_pre_attn_scalar folded into {'q_proj' if model_type == 'gemma2' else 'q_norm'} (x{fold:.6g})"
    if untied_dropped:  # e.g. Gemma 2: its class skips lm_head.weight and llama.cpp reads token_embd as the head
        note += "; the checkpoint's untied lm_head is not converted: llama.cpp uses token_embd as the output head"
    swa_key = gguf.Keys.Attention.SLIDING_WINDOW.format(arch=m.gguf_writer.arch)
    if cfg.get("sliding_window") and not any(swa_key in kv for kv in m.gguf_writer.kv_data):
        note += f"; llama.cpp's {gguf.MODEL_ARCH_NAMES[m.model_arch]} architecture has no sliding window: " \
                f"sliding_window={cfg['sliding_window']} is not applied"
    print(f"convert.py: {note}", file=sys.stderr)
    print(out)


def serve(argv):
    """convert.py --serve [--src ...]: conversions on request, for a worker that converts several
    checkpoints. The imports (torch, transformers, the vendored converter: about 3 s of a 4.5 s
    conversion) are done once; each request line MODEL_DIR<TAB>OUT<TAB>LOG is then converted in a
    forked child exactly as `convert.py MODEL_DIR OUT [--src ...]` would run it, its output into LOG,
    and its exit status answered as one line (a negative number: the signal that ended it). The
    first line out says the server is up; without it a caller runs convert.py once per checkpoint."""
    import traceback
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=os.environ.get("KVC_LLAMA_SRC") or default_src())
    known, _ = ap.parse_known_args(argv)
    src = Path(known.src)
    if not (src / "convert_hf_to_gguf.py").is_file():
        sys.exit(f"convert.py: no convert_hf_to_gguf.py in {src}: run engines/llama_cpp/build_llama.sh first")
    sys.path.insert(0, str(src / "gguf-py"))
    sys.path.insert(0, str(src))
    hand_off()
    import torch  # noqa: F401
    import gguf  # noqa: F401
    import conversion  # noqa: F401
    print("kvc-convert-serve 1", flush=True)
    for line in sys.stdin:
        model_dir, out, log = line.rstrip("\n").split("\t")
        pid = os.fork()
        if pid == 0:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            try:
                code = main([model_dir, out] + argv)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) or e.code is None else (print(e.code, file=sys.stderr) or 1)
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code or 0)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(serve([a for a in sys.argv[1:] if a != "--serve"]) if "--serve" in sys.argv[1:] else main())
