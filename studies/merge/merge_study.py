#!/usr/bin/env python3
"""What transformers PR #40893 changed: 4.56's SlidingWindowLayer and ChunkedSlidingLayer against
4.57's merged StaticSlidingWindowLayer, measured by running the real classes (studies/merge/README.md).

    PY456=/tmp/v456/bin/python PY457=golden/.venv-4.57.6/bin/python
    $PY457 studies/merge/merge_study.py corpus   --py456 $PY456 --py457 $PY457 [--json OUT]
    $PY457 studies/merge/merge_study.py campaign --py456 $PY456 --py457 $PY457 --n 4000 --seed 40893 [--json OUT]
    $PY457 studies/merge/merge_study.py shrink   --py456 $PY456 --py457 $PY457 --from OUT.json --out-dir cases
    $PY457 studies/merge/merge_study.py show     --py456 $PY456 --py457 $PY457 CASE.json
    $PYxxx studies/merge/merge_study.py worker   (internal: JSON lines on stdin/stdout, one per case)

Every static sliding/chunked layer of a case is run, step by step, through each class with float64
tag values (token index + 1, as golden/dump.py's row tracker), so every returned and stored row names
the token it holds. Per step a worker records get_mask_sizes (before update, with cache_position as
both releases take it), the bool mask that release's sdpa_mask builds over those sizes with the
layer's mask function (sliding or chunked, left padding as create_*_mask computes it), update's
exception or its returned/stored rows, the sequence length, and the tokens each real query attends
through the mask (None = the mask and the returned rows disagree in length, so attention would fail).
The orchestrator compares the classes step by step and names the first difference of each pair.
"""
import argparse
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# validate_cases (the case loader) lives with the daily tools in golden/
sys.path.insert(0, os.path.join(REPO, "golden"))

CLASSES_456 = ["SlidingWindowLayer", "ChunkedSlidingLayer"]
CLASSES_457 = ["StaticSlidingWindowLayer"]
SHORT = {"SlidingWindowLayer": "S456", "ChunkedSlidingLayer": "C456", "StaticSlidingWindowLayer": "M457"}
# --dynamic: the PR's "Static and Dynamic caches can now be used exactly the same way", judged on what
# each query attends (the row layouts of the two layers differ by design)
DYNAMIC = "DynamicSlidingWindowLayer"
# (A, B): S456->M457 is what a sliding layer went through, C456->M457 what a chunked layer went through,
# S456 vs C456 is the PR's "exactly the same, except the chunked version is more general".
PAIRS = [("S456", "M457"), ("C456", "M457"), ("S456", "C456")]


# =============================================================================================
# worker: runs inside one transformers venv
# =============================================================================================
def worker_main():
    import torch
    import transformers
    from transformers import cache_utils, masking_utils

    transformers.utils.logging.set_verbosity_error()
    torch.set_num_threads(1)

    def err(e):
        return {"type": type(e).__name__, "message": str(e)[:300]}

    def rows(t):
        return [None if x == 0 else int(round(x)) - 1 for x in t[0, 0, :, 0].tolist()]

    def mask_fn(ltype, window, lpt):
        if ltype == "sliding_attention":
            return masking_utils.sliding_window_causal_mask_function(window)
        return masking_utils.chunked_causal_mask_function(window, lpt)

    def run(cls_name, case, ltype):
        W, M, B = case["window"], case["max_cache_len"], case["batch"]
        if cls_name == "DynamicSlidingWindowLayer":
            layer = cache_utils.DynamicSlidingWindowLayer(sliding_window=W)
        else:
            layer = getattr(cache_utils, cls_name)(max_cache_len=M, sliding_window=W)
        total = sum(s["tokens"] for s in case["steps"])
        lp = case.get("left_padding")
        full_2d = None
        if lp is not None:
            full_2d = torch.tensor([[0] * min(n, total) + [1] * (total - min(n, total)) for n in lp], dtype=torch.bool)
        out, seen, dead = [], 0, None
        for si, step in enumerate(case["steps"]):
            q = step["tokens"]
            positions = step.get("cache_position") or list(range(seen, seen + q))
            if dead is not None:
                out.append({"skipped": dead})
                seen += q
                continue
            rec = {"seq0": int(layer.get_seq_length())}
            cp = torch.tensor(positions, dtype=torch.long)
            am = full_2d[:, : seen + q] if full_2d is not None else None
            if am is not None:
                lpt = (am.cumsum(dim=-1) == torch.zeros_like(am)).sum(dim=-1)
            else:
                lpt = torch.zeros(B, dtype=torch.long)
            kvl = None
            try:
                kvl, kvo = layer.get_mask_sizes(cp)
                kvl, kvo = int(kvl), int(kvo)
                rec["sizes"] = [kvl, kvo]
            except Exception as e:  # noqa: BLE001 - recorded, part of the behaviour
                rec["sizes_error"] = err(e)
            m = None
            if kvl is not None:
                try:
                    m = masking_utils.sdpa_mask(
                        batch_size=B, cache_position=cp, kv_length=kvl, kv_offset=kvo,
                        mask_function=mask_fn(ltype, W, lpt), attention_mask=am,
                        allow_is_causal_skip=False, local_size=W,
                    )
                    rec["mask"] = [["".join("1" if x else "0" for x in m[b, 0, i].tolist()) for i in range(q)] for b in range(B)]
                except Exception as e:  # noqa: BLE001
                    rec["mask_error"] = err(e)
            tags = torch.arange(seen + 1, seen + q + 1, dtype=torch.float64).reshape(1, 1, q, 1).expand(B, 1, q, 1).contiguous()
            try:
                K, _ = layer.update(tags, tags.clone(), cache_kwargs={"cache_position": cp})
                rec["returned"] = rows(K)
                rec["stored"] = rows(layer.keys)
                rec["seq1"] = int(layer.get_seq_length())
            except Exception as e:  # noqa: BLE001
                rec["update_error"] = err(e)
                dead = si
            if m is not None and "returned" in rec:
                ret = rec["returned"]
                if len(ret) != m.shape[-1]:
                    rec["attended"] = None
                else:
                    att = []
                    for b in range(B):
                        per_q = []
                        for i in range(q):
                            sel = [ret[j] if ret[j] is not None else -1 for j in range(len(ret)) if bool(m[b, 0, i, j])]
                            per_q.append(sorted(sel))
                        att.append(per_q)
                    rec["attended"] = att
            out.append(rec)
            seen += q
        return out

    version = transformers.__version__
    for line in sys.stdin:
        req = json.loads(line)
        case = req["case"]
        res = {}
        try:
            for cls_name in req["classes"]:
                per_layer = {}
                for li, lt in enumerate(case["layer_types"]):
                    if lt != "full_attention":
                        per_layer[str(li)] = run(cls_name, case, lt)
                res[cls_name] = per_layer
            sys.stdout.write(json.dumps({"version": version, "results": res}, separators=(",", ":")) + "\n")
        except Exception as e:  # noqa: BLE001 - a driver bug, reported as such
            import traceback
            sys.stdout.write(json.dumps({"version": version, "driver_error": traceback.format_exc()}) + "\n")
        sys.stdout.flush()


# =============================================================================================
# orchestrator
# =============================================================================================
class Worker:
    def __init__(self, python, classes):
        self.classes = classes
        self.p = subprocess.Popen([python, os.path.abspath(__file__), "worker"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, bufsize=1)

    def send(self, case):
        self.p.stdin.write(json.dumps({"case": case, "classes": self.classes}) + "\n")
        self.p.stdin.flush()

    def recv(self):
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("worker died")
        r = json.loads(line)
        if "driver_error" in r:
            raise RuntimeError(r["driver_error"])
        return r

    def close(self):
        self.p.stdin.close()
        self.p.wait()


class Runner:
    def __init__(self, py456, py457, dynamic=False):
        self.w456 = Worker(py456, CLASSES_456 + ([DYNAMIC] if dynamic else []))
        self.w457 = Worker(py457, CLASSES_457 + ([DYNAMIC] if dynamic else []))
        self.versions = {}

    def traces(self, case):
        """{layer index: {"S456": trace, "C456": trace, "M457": trace}} for the case's sliding/chunked layers."""
        self.w456.send(case)
        self.w457.send(case)
        out = {}
        for w in (self.w456, self.w457):
            r = w.recv()
            self.versions[tuple(w.classes)] = r["version"]
            for cls_name, per_layer in r["results"].items():
                short = SHORT.get(cls_name) or ("D" + r["version"].replace(".", "")[:3])
                for li, tr in per_layer.items():
                    out.setdefault(int(li), {})[short] = tr
        return out

    def close(self):
        self.w456.close()
        self.w457.close()


def capacity(case):
    return min(case["window"], case["max_cache_len"])


def situation(seq0, q, cap):
    if seq0 == 0:
        state = "empty"
    elif seq0 < cap:
        state = "partial"
    else:
        state = "full"
    if state == "full":
        qk = "q=1" if q == 1 else ("1<q<=cap" if q <= cap else "q>cap")
    else:
        qk = "fits" if seq0 + q <= cap else ("crosses" if q <= cap else "q>cap")
    return f"{state}, {qk}"


def first_difference(ta, tb, case, a, b):
    """None if the traces agree; else (step, class label, differing fields)."""
    cap = capacity(case)
    for si, (ra, rb) in enumerate(zip(ta, tb)):
        if ra == rb:
            continue
        fields = sorted(k for k in set(ra) | set(rb) if ra.get(k) != rb.get(k))
        sit = situation(ra.get("seq0", rb.get("seq0", 0)), case["steps"][si]["tokens"], cap)
        ea, eb = ra.get("update_error"), rb.get("update_error")
        if (ea is None) != (eb is None):
            who, e = (a, ea) if ea is not None else (b, eb)
            kind = f"only {who} raises {e['type']} in update"
        elif ea != eb:
            kind = "both raise in update, differently"
        elif ("sizes_error" in ra) != ("sizes_error" in rb):
            kind = "get_mask_sizes raises in one only"
        elif len(ra.get("returned", [])) != len(rb.get("returned", [])):
            kind = "returned row count differs"
        elif ra.get("returned") != rb.get("returned"):
            kind = "returned rows differ (same count)"
        elif ra.get("stored") != rb.get("stored"):
            kind = "stored rows differ"
        elif ra.get("sizes") != rb.get("sizes"):
            kind = "mask sizes differ"
        elif ra.get("mask") != rb.get("mask"):
            kind = "mask differs"
        elif ra.get("attended") != rb.get("attended"):
            kind = "attended tokens differ"
        else:
            kind = "sequence length differs"
        return si, f"{kind} [{sit}]", fields
    return None


def semantic_difference(ta, tb, case, a, b):
    """First step where the two layers raise differently or a query attends other tokens."""
    cap = capacity(case)
    for si, (ra, rb) in enumerate(zip(ta, tb)):
        if "skipped" in ra and "skipped" in rb:
            return None
        sit = situation(ra.get("seq0", rb.get("seq0", 0)), case["steps"][si]["tokens"], cap)
        ea, eb = "update_error" in ra or "skipped" in ra, "update_error" in rb or "skipped" in rb
        if ea != eb:
            return si, f"only {a if ea else b} raises in update [{sit}]", []
        if ea:
            return None
        if (ra.get("attended") is None) != (rb.get("attended") is None):
            return si, f"mask/rows length mismatch in {a if ra.get('attended') is None else b} only [{sit}]", []
        if ra.get("attended") != rb.get("attended"):
            return si, f"attended tokens differ [{sit}]", []
    return None


def ideal_ok(trace, case, ltype):
    """Does every real query attend exactly the tokens of its window/chunk (pad tokens excluded)?
    Returns 'ok', 'wrong' (first wrong step) or 'raises'/'misshaped'."""
    W = case["window"]
    lp = case.get("left_padding") or [0] * case["batch"]
    if position_offset(case):
        return "n/a (positions off the cumulative length)"
    seen = 0
    for si, (st, rec) in enumerate(zip(case["steps"], trace)):
        q = st["tokens"]
        if "skipped" in rec:
            return "raises"
        if "update_error" in rec:
            return "raises"
        if rec.get("attended") is None:
            return "misshaped"
        for b in range(case["batch"]):
            for i in range(q):
                p = seen + i
                if p < lp[b]:
                    continue
                if ltype == "sliding_attention":
                    want = [t for t in range(max(lp[b], p - W + 1), p + 1)]
                else:
                    want = [t for t in range(lp[b], p + 1) if (t - lp[b]) // W == (p - lp[b]) // W]
                got = rec["attended"][b][i]
                if got != want:
                    if any(t > p for t in got):
                        how = "wrong: a future token"
                    elif -1 in got:
                        how = "wrong: an unwritten row"
                    elif any(t not in want for t in got):
                        how = "wrong: a token outside the window/chunk"
                    else:
                        how = "wrong: misses tokens"
                    # a static layer holds min(window, max_cache_len) rows: below the window it cannot serve it
                    return how + (" (max_cache_len < window)" if case["max_cache_len"] < W else "")
        seen += q
    return "ok"


# ---------------------------------------------------------------------------------------------
# corpus and campaign
# ---------------------------------------------------------------------------------------------
def corpus_files():
    import validate_cases
    dirs = [os.path.join(REPO, "cases"), os.path.join(REPO, "cases", "generated"), os.path.join(REPO, "cases", "regressions")]
    files = []
    for d in dirs:
        if os.path.isdir(d):
            files += validate_cases.expand_paths([d])
    # this study's own shrunk cases are shown with `show`, not counted as corpus
    return [f for f in files if not os.path.basename(f).startswith("merge_")]


def relevant(case):
    return case["cache"] == "static" and any(t != "full_attention" for t in case["layer_types"])


def random_case(rng, i, seed, shift=False):
    kind = rng.choice(["sliding_attention", "chunked_attention"])
    W = rng.randint(1, 16)
    rel = rng.choice(["below", "equal", "above"])
    if rel == "below" and W > 1:
        M = rng.randint(1, W - 1)
    elif rel == "above":
        M = rng.randint(W + 1, 2 * W + 8)
    else:
        M = W
    cap = min(W, M)
    batch = rng.choice([1, 1, 2, 3])
    lp = None
    if rng.random() < 0.4:
        lp = [rng.randint(0, cap + 2) for _ in range(batch)]
        if rng.random() < 0.5:
            lp[0] = 0
    pre = rng.choice([rng.randint(1, max(1, cap - 1)), cap, cap + 1, rng.randint(1, 3 * cap + 2)])
    steps = [pre]
    for _ in range(rng.randint(0, 6)):
        r = rng.random()
        if r < 0.5:
            steps.append(1)
        elif r < 0.8:
            steps.append(rng.randint(2, max(2, cap)))
        else:
            steps.append(rng.randint(cap + 1, 2 * cap + 2))
    step_objs = [{"tokens": n} for n in steps]
    if shift:
        # off the API contract on purpose: positions that do not start at the cumulative length (#40907)
        off, seen = rng.randint(1, 3), 0
        for st in step_objs:
            st["cache_position"] = list(range(seen + off, seen + off + st["tokens"]))
            seen += st["tokens"]
    return {
        "name": f"merge_campaign_{seed}_{i:05d}",
        "description": "random differential sequence (studies/merge/merge_study.py campaign)",
        "cache": "static", "layer_types": [kind], "window": W, "max_cache_len": M,
        "batch": batch, "heads": 1, "kv_heads": 1, "head_dim": 1, "dtype": "float32",
        "left_padding": lp, "steps": step_objs,
        "inputs": {"generator": "kvc-mix64-v1", "seed": i},
    }


def tally(results):
    """results: [(case name, case, [(li, lt, pair, diff, semantics of A and B)])] -> summary dict."""
    summary = {}
    for name, case, comps in results:
        for li, lt, pair, d, sem in comps:
            s = summary.setdefault(pair, {}).setdefault(lt, {"layers": 0, "agree": 0, "classes": {}})
            s["layers"] += 1
            if d is None:
                s["agree"] += 1
                continue
            si, label, fields = d
            c = s["classes"].setdefault(label, {"count": 0, "example": None, "fields": {}, "semantics": {}})
            c["count"] += 1
            c["semantics"][sem] = c["semantics"].get(sem, 0) + 1
            for f in fields:
                c["fields"][f] = c["fields"].get(f, 0) + 1
            size = (sum(x["tokens"] for x in case["steps"]), len(case["steps"]))
            if c["example"] is None or size < tuple(c["example"]["size"]):
                c["example"] = {"case": name, "layer": li, "step": si, "size": list(size), "case_obj": case}
    return summary


def ideal_tally(runner_traces):
    out = {}
    for name, case, per_layer in runner_traces:
        for li, per in per_layer.items():
            lt = case["layer_types"][li]
            for cls, tr in per.items():
                k = out.setdefault(lt, {}).setdefault(cls, {})
                v = ideal_ok(tr, case, lt)
                e = k.setdefault(v, {"count": 0, "examples": []})
                e["count"] += 1
                if len(e["examples"]) < 3:
                    e["examples"].append(f"{name} layer {li}")
    return out


def run_many(runner, named_cases, progress=True, dynamic=False):
    results, ideal_in = [], []
    pairs = [("M457", "D457"), ("S456", "D456")] if dynamic else PAIRS
    diff = semantic_difference if dynamic else first_difference
    for n, (name, case) in enumerate(named_cases):
        tr = runner.traces(case)
        comps = []
        for li, per in sorted(tr.items()):
            lt = case["layer_types"][li]
            for a, b in pairs:
                sem = f"{a} {ideal_ok(per[a], case, lt)}, {b} {ideal_ok(per[b], case, lt)}"
                comps.append((li, lt, f"{a}-{b}", diff(per[a], per[b], case, a, b), sem))
        results.append((name, case, comps))
        ideal_in.append((name, case, tr))
        if progress and (n + 1) % 250 == 0:
            print(f"  {n + 1}/{len(named_cases)}", file=sys.stderr, flush=True)
    return tally(results), ideal_tally(ideal_in)


def print_summary(summary, ideal, out=sys.stdout):
    for pair in sorted(summary, key=lambda p: [f"{a}-{b}" for a, b in PAIRS].index(p) if p in [f"{a}-{b}" for a, b in PAIRS] else 9):
        for lt, s in sorted(summary.get(pair, {}).items()):
            print(f"{pair} on {lt}: {s['layers']} layers, {s['agree']} agree, {s['layers'] - s['agree']} differ", file=out)
            for label, c in sorted(s["classes"].items(), key=lambda kv: -kv[1]["count"]):
                ex = c["example"]
                print(f"    {c['count']:6d}  {label}   e.g. {ex['case']} layer {ex['layer']} step {ex['step']}", file=out)
                print(f"            semantics: {json.dumps(c['semantics'], sort_keys=True)}", file=out)
    print("window/chunk semantics of each class (real queries attend exactly their window/chunk):", file=out)
    for lt, per in sorted(ideal.items()):
        for cls, k in sorted(per.items()):
            print(f"    {lt:18s} {cls}: " + ", ".join(f"{v} {e['count']} (e.g. {'; '.join(e['examples'])})" for v, e in sorted(k.items())), file=out)


def strip_examples(summary):
    out = json.loads(json.dumps(summary))
    for pair in out.values():
        for s in pair.values():
            for c in s["classes"].values():
                c["example"].pop("case_obj", None)
    return out


# ---------------------------------------------------------------------------------------------
# shrinking
# ---------------------------------------------------------------------------------------------
def normalize(case):
    c = json.loads(json.dumps(case))
    total = sum(s["tokens"] for s in c["steps"])
    c["max_cache_len"] = max(1, c["max_cache_len"])
    if c.get("left_padding") is not None:
        c["left_padding"] = [min(x, total) for x in c["left_padding"]]
        if not any(c["left_padding"]):
            c["left_padding"] = None
    return c


def position_offset(case):
    """k when every step has cache_position = arange(cumulative + k, ...), else None."""
    seen, off = 0, None
    for st in case["steps"]:
        cp = st.get("cache_position")
        if cp is None:
            return None
        k = cp[0] - seen
        if (off is not None and k != off) or cp != list(range(seen + k, seen + k + st["tokens"])):
            return None
        off, seen = k, seen + st["tokens"]
    return off


def with_offset(case, off):
    seen = 0
    for st in case["steps"]:
        st.pop("cache_position", None)
        if off:
            st["cache_position"] = list(range(seen + off, seen + off + st["tokens"]))
        seen += st["tokens"]
    return case


def candidates(case):
    c0 = case
    steps = [s["tokens"] for s in c0["steps"]]
    off = position_offset(c0)

    def with_(**kw):
        o = kw.pop("offset", off)
        c = json.loads(json.dumps(c0))
        c.update(kw)
        if off is not None:
            with_offset(c, o)
        return normalize(c)

    if off:
        for k in sorted({0, off - 1}):
            yield with_(offset=k)

    if len(c0["layer_types"]) > 1:
        for lt in sorted(set(t for t in c0["layer_types"] if t != "full_attention")):
            yield with_(layer_types=[lt])
    for i in range(len(steps)):
        if len(steps) > 1:
            yield with_(steps=[{"tokens": n} for j, n in enumerate(steps) if j != i])
    for i in range(len(steps)):
        for n in sorted({1, steps[i] // 2, steps[i] - 1}):
            if 1 <= n < steps[i]:
                yield with_(steps=[{"tokens": (n if j == i else m)} for j, m in enumerate(steps)])
    for i in range(len(steps) - 1):
        merged = steps[:i] + [steps[i] + steps[i + 1]] + steps[i + 2:]
        yield with_(steps=[{"tokens": n} for n in merged])
    if c0["batch"] > 1:
        lp = c0.get("left_padding")
        for b in range(c0["batch"]):
            keep = [x for j, x in enumerate(lp) if j != b] if lp else None
            yield with_(batch=c0["batch"] - 1, left_padding=keep)
    if c0.get("left_padding"):
        yield with_(left_padding=None)
        for b, x in enumerate(c0["left_padding"]):
            if x > 0:
                yield with_(left_padding=[y - 1 if j == b else y for j, y in enumerate(c0["left_padding"])])
    W, M = c0["window"], c0["max_cache_len"]
    for w in sorted({1, W // 2, W - 1}):
        if 1 <= w < W:
            yield with_(window=w)
            yield with_(window=w, max_cache_len=max(1, M - (W - w)))
    for m in sorted({1, M // 2, M - 1}):
        if 1 <= m < M:
            yield with_(max_cache_len=m)
    if off is None and any("cache_position" in s for s in c0["steps"]):
        yield with_(steps=[{"tokens": s["tokens"]} for s in c0["steps"]])


def size_key(case):
    return (sum(s["tokens"] for s in case["steps"]), len(case["steps"]), position_offset(case) or 0, case["batch"],
            sum(case.get("left_padding") or []), case["window"], case["max_cache_len"], len(case["layer_types"]))


def shrink(runner, case, pair, label):
    a, b = pair.split("-")

    def holds(c):
        tr = runner.traces(c)
        for li, per in tr.items():
            if c["layer_types"][li] != case_lt:
                continue
            d = first_difference(per[a], per[b], c, a, b)
            if d is not None and d[1] == label:
                return True
        return False

    case_lt = None
    cur = normalize(case)
    # the layer type the class was seen on is kept
    for li, per in sorted(runner.traces(cur).items()):
        d = first_difference(per[a], per[b], cur, a, b)
        if d is not None and d[1] == label:
            case_lt = cur["layer_types"][li]
            break
    if case_lt is None:
        return None
    changed = True
    while changed:
        changed = False
        for cand in sorted(candidates(cur), key=size_key):
            if size_key(cand) < size_key(cur) and holds(cand):
                cur, changed = cand, True
                break
    cur["heads"], cur["kv_heads"], cur["head_dim"] = 1, 1, 1
    return cur


# ---------------------------------------------------------------------------------------------
# showing a case step by step (for studies/merge/README.md)
# ---------------------------------------------------------------------------------------------
def describe_step(rec):
    if "skipped" in rec:
        return f"(layer dead since step {rec['skipped']})"
    parts = [f"len {rec['seq0']}"]
    if "sizes" in rec:
        parts.append(f"sizes (kv_length {rec['sizes'][0]}, kv_offset {rec['sizes'][1]})")
    else:
        parts.append(f"get_mask_sizes raises {rec['sizes_error']['type']}")
    if "update_error" in rec:
        e = rec["update_error"]
        parts.append(f"update raises {e['type']}: {e['message'].splitlines()[0][:120]}")
    else:
        fmt = lambda rows: "[" + " ".join("_" if r is None else str(r) for r in rows) + "]"  # noqa: E731
        parts.append(f"returns {fmt(rec['returned'])}")
        parts.append(f"stores {fmt(rec['stored'])}")
        if rec.get("attended") is None and "mask" in rec:
            parts.append(f"mask has {len(rec['mask'][0][0])} columns for {len(rec['returned'])} rows")
        elif rec.get("attended") is not None:
            att = rec["attended"][0]
            parts.append("row 0 queries attend " + "; ".join(",".join(str(t) for t in a) or "-" for a in att))
    return ", ".join(parts)


def show(runner, case, out=sys.stdout):
    tr = runner.traces(case)
    for li, per in sorted(tr.items()):
        lt = case["layer_types"][li]
        print(f"layer {li} ({lt}), window {case['window']}, max_cache_len {case['max_cache_len']}, capacity {capacity(case)}", file=out)
        seen = 0
        for si, st in enumerate(case["steps"]):
            print(f"  step {si}: {st['tokens']} token(s) {seen}..{seen + st['tokens'] - 1}", file=out)
            for cls in ("S456", "C456", "M457"):
                print(f"    {cls}: {describe_step(per[cls][si])}", file=out)
            seen += st["tokens"]
        for a, b in PAIRS:
            d = first_difference(per[a], per[b], case, a, b)
            print(f"  {a} vs {b}: " + ("agree" if d is None else f"step {d[0]}: {d[1]} (fields {', '.join(d[2])})"), file=out)
        for cls in ("S456", "C456", "M457"):
            print(f"  {cls} window semantics: {ideal_ok(per[cls], case, lt)}", file=out)


def selfcheck():
    """The comparison and the window judge can fail: hand-made traces of a W 2 / max_cache_len 2 layer
    (2 tokens, then 3) and mutants of them must be told apart. Needs no transformers."""
    case = {"window": 2, "max_cache_len": 2, "batch": 1, "left_padding": None, "steps": [{"tokens": 2}, {"tokens": 3}]}
    good = [
        {"seq0": 0, "sizes": [2, 0], "returned": [0, 1], "stored": [0, 1], "seq1": 2, "attended": [[[0], [0, 1]]]},
        {"seq0": 2, "sizes": [4, 1], "returned": [1, 2, 3, 4], "stored": [3, 4], "seq1": 5, "attended": [[[1, 2], [2, 3], [3, 4]]]},
    ]
    mutants = {
        "returned row count differs [full, q>cap]": lambda t: t[1].update(returned=[2, 3, 4]),
        "returned rows differ (same count)": lambda t: t[1].update(returned=[0, 2, 3, 4]),
        "stored rows differ": lambda t: t[1].update(stored=[4, 3]),
        "mask sizes differ [full, q>cap]": lambda t: t[1].update(sizes=[4, 0]),
        "only B raises RuntimeError in update [full, q>cap]": lambda t: t[1].update(update_error={"type": "RuntimeError", "message": "x"}),
    }
    failures = []
    if first_difference(good, json.loads(json.dumps(good)), case, "A", "B") is not None:
        failures.append("identical traces reported as different")
    if ideal_ok(good, case, "sliding_attention") != "ok":
        failures.append("the correct trace is not judged ok")
    for want, mutate in mutants.items():
        bad = json.loads(json.dumps(good))
        mutate(bad)
        d = first_difference(good, bad, case, "A", "B")
        if d is None or not d[1].startswith(want.split(" [")[0]) or d[0] != 1:
            failures.append(f"mutant '{want}' classified as {d}")
    future = json.loads(json.dumps(good))
    future[1]["attended"] = [[[2, 3], [3, 4], [4]]]
    if ideal_ok(future, case, "sliding_attention") != "wrong: a future token":
        failures.append("a query attending a future token is not judged so")
    missing = json.loads(json.dumps(good))
    missing[1]["attended"] = [[[2], [2, 3], [3, 4]]]
    if ideal_ok(missing, case, "sliding_attention") != "wrong: misses tokens":
        failures.append("a query missing a window token is not judged so")
    for f in failures:
        print(f"selfcheck: {f}", file=sys.stderr)
    print(f"selfcheck: {'FAIL' if failures else 'ok'} ({len(mutants) + 4} checks)")
    return 1 if failures else 0


def print_tables(corpus_path, campaign_path, out=sys.stdout):
    with open(corpus_path) as f:
        corpus = json.load(f)
    with open(campaign_path) as f:
        campaign = json.load(f)
    lts = ("sliding_attention", "chunked_attention")
    for a, b in PAIRS:
        pair = f"{a}-{b}"
        print(f"\n**{a} vs {b}**\n", file=out)
        print("| first difference [situation] | corpus sliding | corpus chunked | campaign sliding | campaign chunked |", file=out)
        print("| --- | --- | --- | --- | --- |", file=out)
        labels = set()
        for src in (corpus, campaign):
            for lt in lts:
                labels |= set(src["summary"].get(pair, {}).get(lt, {}).get("classes", {}))

        def cell(src, lt, label=None):
            d = src["summary"].get(pair, {}).get(lt, {"layers": 0, "agree": 0, "classes": {}})
            if label is None:
                return f"{d['agree']} / {d['layers']}"
            return str(d["classes"].get(label, {}).get("count", 0))

        print(f"| agree (layers agreeing / layers) | {cell(corpus, lts[0])} | {cell(corpus, lts[1])} | "
              f"{cell(campaign, lts[0])} | {cell(campaign, lts[1])} |", file=out)
        total = lambda src, lt: sum(c["count"] for c in src["summary"].get(pair, {}).get(lt, {}).get("classes", {}).values())  # noqa: E731
        for label in sorted(labels, key=lambda l: -sum(int(cell(campaign, lt, l)) for lt in lts)):
            print(f"| {label} | {cell(corpus, lts[0], label)} | {cell(corpus, lts[1], label)} | "
                  f"{cell(campaign, lts[0], label)} | {cell(campaign, lts[1], label)} |", file=out)
        print(f"| all differences | {total(corpus, lts[0])} | {total(corpus, lts[1])} | {total(campaign, lts[0])} | {total(campaign, lts[1])} |", file=out)
    print("\n**Window semantics per class** (layers; corpus / campaign)\n", file=out)
    print("| layer type | class | outcome | corpus | campaign |", file=out)
    print("| --- | --- | --- | --- | --- |", file=out)
    for lt in lts:
        for cls in ("S456", "C456", "M457"):
            outcomes = set(corpus["ideal"].get(lt, {}).get(cls, {})) | set(campaign["ideal"].get(lt, {}).get(cls, {}))
            for o in sorted(outcomes):
                n1 = corpus["ideal"].get(lt, {}).get(cls, {}).get(o, {}).get("count", 0)
                n2 = campaign["ideal"].get(lt, {}).get(cls, {}).get(o, {}).get("count", 0)
                print(f"| {lt} | {cls} | {o} | {n1} | {n2} |", file=out)


# ---------------------------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("worker")
    for name in ("corpus", "campaign", "shrink", "show"):
        p = sub.add_parser(name)
        p.add_argument("--py456", required=True, help="python of a transformers 4.56.x venv")
        p.add_argument("--py457", required=True, help="python of a transformers 4.57.x venv")
        if name in ("corpus", "campaign"):
            p.add_argument("--json", help="write the summary (counts, smallest example per class) here")
            p.add_argument("--dynamic", action="store_true",
                           help="compare each release's static layer with its DynamicSlidingWindowLayer on what queries attend")
        if name == "campaign":
            p.add_argument("--n", type=int, default=4000)
            p.add_argument("--seed", type=int, default=40893)
            p.add_argument("--shifted-positions", action="store_true",
                           help="give every step cache_position = arange(cumulative + 1..3, ...) (off the API contract; what #40907 changed)")
        if name == "shrink":
            p.add_argument("--from", dest="src", nargs="+", required=True, help="summary JSON files (corpus/campaign --json)")
            p.add_argument("--out", required=True, help="write the shrunk cases (one per pair and class) here as JSON")
            p.add_argument("--pair", action="append", help="only these pairs (e.g. S456-M457); default all")
            p.add_argument("--top", type=int, default=0, help="only the N most frequent classes of each pair and layer type")
        if name == "show":
            p.add_argument("case", nargs="+")
    sub.add_parser("selfcheck", help="the classifier and the window judge on hand-made traces and mutants (no transformers needed)")
    p = sub.add_parser("table", help="markdown tables of studies/merge/README.md from the corpus/campaign summaries")
    p.add_argument("--corpus", required=True)
    p.add_argument("--campaign", required=True)
    args = ap.parse_args(argv)
    if args.cmd == "worker":
        worker_main()
        return 0
    if args.cmd == "selfcheck":
        return selfcheck()
    if args.cmd == "table":
        print_tables(args.corpus, args.campaign)
        return 0

    runner = Runner(args.py456, args.py457, dynamic=getattr(args, "dynamic", False))
    try:
        if args.cmd == "show":
            for path in args.case:
                with open(path) as f:
                    print(f"== {os.path.relpath(path, REPO) if os.path.isabs(path) else path}")
                    show(runner, json.load(f))
            return 0
        if args.cmd == "corpus":
            named = []
            for p in corpus_files():
                with open(p) as f:
                    c = json.load(f)
                if relevant(c):
                    named.append((os.path.relpath(p, REPO), c))
            print(f"corpus: {len(corpus_files())} files, {len(named)} static cases with a sliding/chunked layer", file=sys.stderr)
            summary, ideal = run_many(runner, named, dynamic=args.dynamic)
        elif args.cmd == "campaign":
            rng = random.Random(args.seed)
            named = [(f"campaign[{i}]", random_case(rng, i, args.seed, args.shifted_positions)) for i in range(args.n)]
            summary, ideal = run_many(runner, named, dynamic=args.dynamic)
        if args.cmd in ("corpus", "campaign"):
            print_summary(summary, ideal)
            print(f"versions: {json.dumps({' '.join(k): v for k, v in runner.versions.items()})}")
            if args.json:
                with open(args.json, "w") as f:
                    json.dump({"command": args.cmd, "n_cases": len(named), "seed": getattr(args, "seed", None),
                               "shifted_positions": getattr(args, "shifted_positions", None), "dynamic": args.dynamic,
                               "versions": {" ".join(k): v for k, v in runner.versions.items()},
                               "summary": summary, "ideal": ideal}, f, indent=1, sort_keys=True)
                    f.write("\n")
            return 0
        if args.cmd == "shrink":
            todo = {}
            for src in args.src:
                with open(src) as f:
                    s = json.load(f)["summary"]
                for pair, per_lt in s.items():
                    if args.pair and pair not in args.pair:
                        continue
                    for lt, d in per_lt.items():
                        ranked = sorted(d["classes"].items(), key=lambda kv: (-kv[1]["count"], kv[0]))
                        for label, c in ranked[: args.top or None]:
                            key = (pair, label)
                            ex = c["example"]
                            if key not in todo or tuple(ex["size"]) < tuple(todo[key]["size"]):
                                todo[key] = ex
            shrunk = []
            for (pair, label), ex in sorted(todo.items()):
                r = shrink(runner, ex["case_obj"], pair, label)
                print(f"{pair}: {label}: {'not reproduced' if r is None else size_key(r)}", file=sys.stderr, flush=True)
                shrunk.append({"pair": pair, "label": label, "from": ex["case"], "case": r})
            with open(args.out, "w") as f:
                json.dump(shrunk, f, indent=1)
                f.write("\n")
            return 0
    finally:
        runner.close()
    return 2


if __name__ == "__main__":
    sys.exit(main())
