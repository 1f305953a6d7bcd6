#!/usr/bin/env python3
"""Cross-check: the masks dump.py builds by calling sdpa_mask/eager_mask directly must equal what
transformers' own create_causal_mask / create_sliding_window_causal_mask / create_chunked_causal_mask
return for a real Cache built from the same layers (config._attn_implementation "sdpa" and "eager").

    golden/.venv-<version>/bin/python golden/crosscheck_masks.py [cases/ ...]

Prints one line per mismatch and exits 1 if there is any, 0 otherwise.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
from transformers import PretrainedConfig  # noqa: E402
from transformers import cache_utils, masking_utils  # noqa: E402

import dump  # noqa: E402
import validate_cases  # noqa: E402

CREATE = {
    "full_attention": masking_utils.create_causal_mask,
    "sliding_attention": masking_utils.create_sliding_window_causal_mask,
    "chunked_attention": masking_utils.create_chunked_causal_mask,
}


def make_config(case, impl):
    cfg = PretrainedConfig()
    cfg._attn_implementation = impl
    if case.get("window") is not None:
        cfg.sliding_window = case["window"]
        cfg.attention_chunk_size = case["window"]
    return cfg


def create(case, ltype, impl, embeds, am, cp, cache):
    A = dump.api()
    fn = CREATE[ltype]
    cfg = make_config(case, impl)
    if A.update_takes_cache_kwargs:
        return fn(config=cfg, input_embeds=embeds, attention_mask=am, cache_position=cp, past_key_values=cache)
    return fn(config=cfg, inputs_embeds=embeds, attention_mask=am, cache=cache)


def check(case, raw):
    A = dump.api()
    fx = dump.dump_case(case, raw)
    dtype = dump.DTYPES[case["dtype"]]
    B = case["batch"]
    layers = [dump.make_layer(case, lt) for lt in case["layer_types"]]
    cache = cache_utils.Cache(layers=layers)
    total = sum(s["tokens"] for s in case["steps"])
    lp = case.get("left_padding")
    full_2d = None
    if lp is not None:
        full_2d = torch.tensor([[0] * n + [1] * (total - n) for n in lp], dtype=torch.long)
    problems = []
    cum = 0
    for si, step in enumerate(case["steps"]):
        q = step["tokens"]
        cp = torch.tensor(step.get("cache_position") or list(range(cum, cum + q)), dtype=torch.long)
        am = full_2d[:, : cum + q] if full_2d is not None else None
        embeds = torch.empty(B, q, 1, dtype=dtype)
        for lt in dict.fromkeys(case["layer_types"]):
            li = case["layer_types"].index(lt)
            rec = fx["steps"][si]["layers"][li]
            if "skipped" in rec or rec.get("mask_sizes") is None:
                continue
            try:
                sdpa = create(case, lt, "sdpa", embeds, am, cp, cache)
                eager = create(case, lt, "eager", embeds, am, cp, cache)
            except Exception as e:
                problems.append(f"step {si} {lt}: create_*_mask raised {type(e).__name__}: {e}")
                continue
            got_sdpa = dump.mask_strings(sdpa) if sdpa is not None else None
            if got_sdpa != rec["sdpa_mask"]:
                problems.append(f"step {si} {lt}: sdpa mask differs: create_*_mask {got_sdpa} vs dump {rec['sdpa_mask']}")
            got_eager = dump.sha256_bytes(dump.tensor_bytes(eager)) if eager is not None else None
            want_eager = rec["eager_mask"]["sha256"] if rec["eager_mask"] else None
            if got_eager != want_eager:
                problems.append(f"step {si} {lt}: eager mask differs")
        for li, lt in enumerate(case["layer_types"]):
            k = torch.zeros(B, case["kv_heads"], q, case["head_dim"], dtype=dtype) + 1
            try:
                if A.update_takes_cache_kwargs:
                    cache.update(k, k, li, cache_kwargs={"cache_position": cp})
                else:
                    cache.update(k, k, li)
            except Exception:
                return problems  # the dump records the failure; nothing more to compare
        cum += q
    return problems


def main(argv):
    paths = argv or [os.path.join(os.path.dirname(HERE), "cases")]
    bad = 0
    files = validate_cases.expand_paths(paths)
    for p in files:
        case, raw, errs = validate_cases.load_case_file(p)
        if errs:
            for ptr, msg in errs:
                print(f"{p}: {ptr}: {msg}")
            bad += 1
            continue
        for prob in check(case, raw):
            print(f"{p}: {prob}")
            bad += 1
    print(f"crosscheck_masks: {len(files)} cases, {bad} problems", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
