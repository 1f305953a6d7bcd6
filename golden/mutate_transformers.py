#!/usr/bin/env python3
"""Mutation campaign against the installed transformers: how much of the release's cache and mask
behaviour kvconform's fixtures pin down.

    python3 golden/mutate_transformers.py --release 5.25.0 [--jobs 2] [--seed 1] [--sample N]
        [--doc docs/transformers-mutants.md]

It makes mutants of the release's own source (transformers/cache_utils.py: the layer mixin, the
dynamic, static and sliding layers; transformers/masking_utils.py: the overlays, the padding mask, the
SDPA skip rule, sdpa_mask / eager_mask and the causal, sliding and chunked mask builders) with Python's
ast module, one change per mutant, by the operators of OPERATORS below, in source order (a --sample is
drawn from that list by --seed). Each mutant is loaded IN-PROCESS: a child forked from this process
(which imported torch and transformers once) re-compiles the mutated function in the module's globals
and binds it where the original was (the class attribute, the module global and every dict that held
the original, such as the mask interface's registry). Then, stopping at the first difference:

  1. the golden dump (dump.py's dump_case) of every case that executes the mutated line, compared
     byte for byte with the release's committed fixture: golden replay is bitwise, so a difference is a
     mutant that `kvconform run` reports (killed by "golden");
  2. the mask crosscheck (crosscheck_masks.py's check) of every case that executes the line: the
     release's own create_*_mask builders against the committed fixtures (killed by "crosscheck").

Which cases execute which line is measured once per release on the unmutated source (line tracing,
kept with the results): a case that never executes the mutated line cannot tell the mutant apart, so
it is not run, and a mutant whose line no case executes survives without a run (an automatic `gap`).
A child that runs past its time is killed and counts as killed ("timeout"), as one that crashes: ten
times what the unmutated release took on the cases the mutant runs (measured with the coverage, so a
loaded machine stretches both), at least 120 s; --timeout S sets it.

Results are appended to a JSON-lines file keyed by release, mutant id and the sha256 of the mutated
function, the module's source and the inputs (cases, fixtures, dump.py, crosscheck_masks.py): a rerun
skips what is there (resumable), and a changed input runs again. The documented run's results are
committed (golden/mutation/<release>.results.jsonl, written by --doc): without --results they are read
under the working file's, so a fresh checkout regenerates the report (--no-run --doc) and resumes the
campaign from them (a kill whose case and fixture are unchanged stands: kill_key). Survivors are classified by
golden/mutation/<release>.json (hand-written judgements: `equivalent` with the evidence or `gap` with
what kvconform would need to drive; each names the mutant's sha so a changed mutant is judged again),
or automatically as a `gap` where no case executes the mutated line; any other survivor is reported
`unexplained`. --doc writes the release's section of the documented result.

--upstream-tests DIR adds a second part beside "kvconform": transformers' own tests (test_*.py of DIR,
copied from a checkout of the release's tag; they ship in neither wheel nor sdist) run by pytest in the
child with the mutant bound, offline; only the tests passing on the unmutated release count, and each
mutant runs those that execute its line (class Upstream). The report puts the two side by side.

Exit status: 0 when the campaign ran (whatever the kill rate; --min-kill-rate P makes a lower rate
exit 1), 2 on bad usage or when the unmutated release does not reproduce its committed fixtures.
"""
import argparse
import ast
import copy
import difflib
import gc
import hashlib
import json
import os
import random
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

CAMPAIGN_VERSION = "1"  # part of every result's key: a change to what a run does runs every mutant again

# What is mutated: per module, the classes whose methods and the functions whose bodies are. A name
# the release lacks is left out (4.56 has SlidingWindowLayer / ChunkedSlidingLayer, later releases
# StaticSlidingWindowLayer).
CACHE_CLASSES = ("CacheLayerMixin", "DynamicLayer", "DynamicSlidingWindowLayer", "StaticLayer",
                 "StaticSlidingWindowLayer", "SlidingWindowLayer", "ChunkedSlidingLayer")
# Methods outside the sliding-window layer API kvconform proves: device offloading, beam search
# reordering and batch expansion for generation strategies, and the repr.
EXCLUDED_METHODS = ("offload", "prefetch", "reorder_cache", "batch_repeat_interleave", "batch_select_indices",
                    "__repr__", "__init_subclass__")
MASK_FUNCTIONS = ("and_masks", "or_masks", "causal_mask_function", "sliding_window_overlay", "chunked_overlay",
                  "sliding_window_causal_mask_function", "chunked_causal_mask_function", "padding_mask_function",
                  "add_offsets_to_mask_function", "prepare_padding_mask", "_ignore_causal_mask_sdpa",
                  "_vmap_expansion_sdpa", "_non_vmap_expansion_sdpa", "sdpa_mask", "sdpa_mask_recent_torch",
                  "sdpa_mask_older_torch", "eager_mask", "_preprocess_mask_arguments", "create_causal_mask",
                  "create_sliding_window_causal_mask", "create_chunked_causal_mask")
MODULES = ("cache_utils", "masking_utils")

RELATIONAL = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
              ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
MINMAX = {"min": "max", "max": "min", "minimum": "maximum", "maximum": "minimum", "amin": "amax", "amax": "amin"}
# operator -> what it changes (the report's legend)
OPERATORS = {
    "rel": "relational flip (< <=, > >=, == !=, is / is not, in / not in)",
    "const": "off-by-one on an integer constant (n+1, n-1)",
    "drop": "a statement dropped (replaced by pass)",
    "slice": "a slice bound changed (+1, -1) or dropped",
    "ret": "the first two values of a returned tuple swapped",
    "minmax": "min/max (minimum/maximum, amin/amax) swapped",
    "neg": "boolean negation (a condition negated, and/or swapped, True/False flipped, a not removed)",
}


def line_tracer(files, lines):
    """A sys.settrace function that adds (module, line) to `lines` for every line executed in `files`
    ({path: module}): the baseline's measure of which lines a case or a test runs."""
    def local(frame, event, arg):
        if event == "line":
            lines.add((files[frame.f_code.co_filename], frame.f_lineno))
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename in files else None
    return tracer


# --------------------------------------------------------------------------------------------
# mutants
# --------------------------------------------------------------------------------------------
class Site:
    """One mutation: where (a path of (field, index) from the function node), which operator and variant."""

    def __init__(self, path, op, variant, stmt_line, node):
        self.path, self.op, self.variant, self.stmt_line = path, op, variant, stmt_line
        self.lineno, self.col = node.lineno, node.col_offset


def _quiet_call(node):
    """Calls whose mutation changes only what is logged: logger.*, warnings.warn, logging helpers."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    text = ast.unparse(f)
    return text.startswith("logger.") or text in ("warnings.warn", "warn", "logger")


def sites_of(fn):
    """Every mutation site of a function's body, in source order."""
    out = []

    def visit(node, path, stmt_line, in_body_list):
        if isinstance(node, (ast.JoinedStr, ast.FormattedValue)) or _quiet_call(node):
            return
        if isinstance(node, ast.stmt):
            stmt_line = node.lineno
            if in_body_list and not isinstance(node, ast.Pass) and not (
                    isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)) and not (
                    isinstance(node, ast.Expr) and _quiet_call(node.value)):
                out.append(Site(path, "drop", 0, stmt_line, node))
        if isinstance(node, ast.Compare):
            for i, o in enumerate(node.ops):
                if type(o) in RELATIONAL:
                    out.append(Site(path, "rel", i, stmt_line, node))
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            out.append(Site(path, "const", 0, stmt_line, node))
            out.append(Site(path, "const", 1, stmt_line, node))
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            out.append(Site(path, "neg", 0, stmt_line, node))
        elif isinstance(node, ast.Slice):
            for bi, bound in enumerate(("lower", "upper")):
                b = getattr(node, bound)
                if b is None:
                    continue
                if not isinstance(b, ast.Constant) and not (
                        isinstance(b, ast.UnaryOp) and isinstance(b.operand, ast.Constant)):
                    out.append(Site(path, "slice", bi * 3 + 0, stmt_line, node))
                    out.append(Site(path, "slice", bi * 3 + 1, stmt_line, node))
                out.append(Site(path, "slice", bi * 3 + 2, stmt_line, node))
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and len(node.value.elts) >= 2:
            out.append(Site(path, "ret", 0, stmt_line, node))
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name in MINMAX:
                out.append(Site(path, "minmax", 0, stmt_line, node))
        elif isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            out.append(Site(path, "neg", 0, stmt_line, node))
        elif isinstance(node, ast.BoolOp):
            out.append(Site(path, "neg", 0, stmt_line, node))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            out.append(Site(path, "neg", 0, stmt_line, node))
        for field, value in ast.iter_fields(node):
            if field in ("decorator_list", "args", "returns", "type_comment") and isinstance(node, ast.FunctionDef):
                continue  # defaults, annotations and decorators are evaluated once, at definition
            if isinstance(value, list):
                for i, child in enumerate(value):
                    if isinstance(child, ast.AST):
                        visit(child, path + [(field, i)], stmt_line, field in ("body", "orelse", "finalbody"))
            elif isinstance(value, ast.AST):
                visit(value, path + [(field, None)], stmt_line, False)

    for i, stmt in enumerate(fn.body):
        visit(stmt, [("body", i)], stmt.lineno, True)
    return out


def _get(node, path):
    for field, i in path:
        node = getattr(node, field) if i is None else getattr(node, field)[i]
    return node


def _replace(root, path, new):
    parent = _get(root, path[:-1])
    field, i = path[-1]
    if i is None:
        setattr(parent, field, new)
    else:
        getattr(parent, field)[i] = new


def _plus(expr, n):
    return ast.BinOp(left=expr, op=ast.Add() if n > 0 else ast.Sub(), right=ast.Constant(abs(n)))


def apply_site(fn, site):
    """-> a mutated deep copy of the function node (None when the mutation changes nothing)."""
    m = copy.deepcopy(fn)
    node = _get(m, site.path)
    op, v = site.op, site.variant
    if op == "drop":
        _replace(m, site.path, ast.Pass())
    elif op == "rel":
        node.ops[v] = RELATIONAL[type(node.ops[v])]()
    elif op == "const":
        _replace(m, site.path, ast.Constant(node.value + (1 if v == 0 else -1)))
    elif op == "slice":
        bound = ("lower", "upper")[v // 3]
        kind = v % 3
        b = getattr(node, bound)
        setattr(node, bound, _plus(b, 1) if kind == 0 else _plus(b, -1) if kind == 1 else None)
    elif op == "ret":
        e = node.value.elts
        e[0], e[1] = e[1], e[0]
    elif op == "minmax":
        if isinstance(node.func, ast.Attribute):
            node.func.attr = MINMAX[node.func.attr]
        else:
            node.func.id = MINMAX[node.func.id]
    elif op == "neg":
        if isinstance(node, ast.Constant):
            _replace(m, site.path, ast.Constant(not node.value))
        elif isinstance(node, ast.BoolOp):
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        elif isinstance(node, ast.UnaryOp):
            _replace(m, site.path, node.operand)
        else:
            t = node.test
            node.test = t.operand if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not) else ast.UnaryOp(
                op=ast.Not(), operand=t)
    ast.fix_missing_locations(m)  # a new node takes the line of the node it sits in
    return m



class Target:
    """A mutable function: module short name, qualified name, the node, the class (or None)."""

    def __init__(self, module, qual, node, cls):
        self.module, self.qual, self.node, self.cls = module, qual, node, cls
        self.source = ast.unparse(node)


def targets_of(module, tree):
    out = []
    for top in tree.body:
        if module == "cache_utils" and isinstance(top, ast.ClassDef) and top.name in CACHE_CLASSES:
            for item in top.body:
                if isinstance(item, ast.FunctionDef) and item.name not in EXCLUDED_METHODS:
                    out.append(Target(module, f"{top.name}.{item.name}", item, top.name))
        elif module == "masking_utils" and isinstance(top, ast.FunctionDef) and top.name in MASK_FUNCTIONS:
            out.append(Target(module, top.name, top, None))
    return out


class Mutant:
    def __init__(self, target, site, node, module_sha, inputs_key, release, nth=1):
        self.target, self.site, self.node = target, site, node
        self.source = ast.unparse(node)
        self.module_sha = module_sha
        # nth: the nth mutant of one place and operator (`not a or b` negates the `or` and the `not`,
        # both starting at a's column): "-2" makes the second one's id its own
        self.id = f"{target.module}:{target.qual}:L{site.lineno}:C{site.col}:{site.op}{site.variant}" + (
            f"-{nth}" if nth > 1 else "")
        self.sha = hashlib.sha256(self.source.encode()).hexdigest()
        self.key = hashlib.sha256("\0".join((CAMPAIGN_VERSION, release, self.id, self.sha, module_sha,
                                             inputs_key)).encode()).hexdigest()

    def diff(self):
        a = self.target.source.splitlines()
        b = self.source.splitlines()
        lines = [l for l in difflib.unified_diff(a, b, lineterm="", n=0)][2:]
        return "\n".join(l for l in lines if not l.startswith("@@"))


def enumerate_mutants(sources, release, inputs_key, only=None):
    out, seen, places = [], set(), {}
    for module in MODULES:
        text, sha = sources[module]
        tree = ast.parse(text)
        for t in targets_of(module, tree):
            if only and not re.search(only, f"{module}:{t.qual}"):
                continue
            for site in sites_of(t.node):
                m = apply_site(t.node, site)
                mut = Mutant(t, site, m, sha, inputs_key, release)
                if mut.source == t.source or (t.qual, mut.sha) in seen:
                    continue  # a no-op, or the same function as an earlier mutant
                nth = places[mut.id] = places.get(mut.id, 0) + 1
                if nth > 1:
                    mut = Mutant(t, site, m, sha, inputs_key, release, nth)
                seen.add((t.qual, mut.sha))
                out.append(mut)
    return out


# --------------------------------------------------------------------------------------------
# loading a mutant in-process (in a forked child)
# --------------------------------------------------------------------------------------------
def install(mutant, modules):
    """Compiles the mutated function in its module's globals and binds it wherever the original was."""
    mod = modules[mutant.target.module]
    g = mod.__dict__
    name = mutant.target.node.name
    if mutant.target.cls:
        # the method inside a factory taking __class__, so zero-argument super() finds its class
        factory = ast.FunctionDef(name="__kvc_mutant_factory",
                                  args=ast.arguments(posonlyargs=[], args=[ast.arg(arg="__class__")], kwonlyargs=[],
                                                     kw_defaults=[], defaults=[]),
                                  body=[mutant.node, ast.Return(value=ast.Name(id=name, ctx=ast.Load()))],
                                  decorator_list=[], returns=None, type_params=[])
        module = ast.Module(body=[factory], type_ignores=[])
        ast.fix_missing_locations(module)
        ns = {}
        exec(compile(module, mod.__file__, "exec"), g, ns)
        cls = getattr(mod, mutant.target.cls)
        old = cls.__dict__[name]
        new = ns["__kvc_mutant_factory"](cls)
        setattr(cls, name, new)
    else:
        old = g[name]
        module = ast.Module(body=[mutant.node], type_ignores=[])
        ns = {}
        exec(compile(module, mod.__file__, "exec"), g, ns)
        new = ns[name]
        g[name] = new
    # every dict that held the original (another module's `from ... import`, a registry such as
    # AttentionMaskInterface._global_mapping, an alias like sdpa_mask = sdpa_mask_recent_torch)
    for ref in gc.get_referrers(old):
        # not a class's own namespace: written behind the type's back it leaves a stale method cache
        # (a crash); the class was rebound through setattr above
        if isinstance(ref, dict) and ref is not ns and not any(isinstance(o, type) for o in gc.get_referrers(ref)):
            for k, v in list(ref.items()):
                if v is old:
                    ref[k] = new


# --------------------------------------------------------------------------------------------
# the harness side: cases, coverage, the checks
# --------------------------------------------------------------------------------------------
class Harness:
    def __init__(self, release, case_paths):
        self.release = release
        self.modules = None
        import validate_cases
        self.fixtures = os.path.join(HERE, "fixtures", release)
        if not os.path.isdir(self.fixtures):
            raise SystemExit(f"mutate: no fixtures for {release} ({self.fixtures}); dump them first (golden/README.md)")
        self.cases = []  # (name, case, raw, fixture text)
        for p in sorted(set(validate_cases.expand_paths(case_paths))):
            case, raw, errs = validate_cases.load_case_file(p)
            if errs:
                raise SystemExit(f"mutate: {p}: {errs[0][0]}: {errs[0][1]}")
            releases = validate_cases.releases_of(case)
            if releases is not None and release not in releases:
                continue  # the case's profile leaves this release out (dump.py's applies)
            fx = os.path.join(self.fixtures, case["name"] + ".json")
            if not os.path.isfile(fx):
                raise SystemExit(f"mutate: no fixture {fx} for case {p}; dump the release's fixtures first")
            with open(fx, encoding="ascii") as f:
                self.cases.append((case["name"], case, raw, f.read()))
        # smaller fixtures first: a mutant most cases tell apart is killed sooner
        self.cases.sort(key=lambda c: (len(c[3]), c[0]))
        self.by_name = {c[0]: c for c in self.cases}

    def load(self):
        """Imports torch, the release's transformers, dump.py and crosscheck_masks.py (seconds)."""
        import crosscheck_masks
        crosscheck_masks.load_release()
        self.cc = crosscheck_masks
        self.dump = crosscheck_masks.dump
        import torch
        torch.set_num_threads(1)
        from transformers import cache_utils, masking_utils
        self.modules = {"cache_utils": cache_utils, "masking_utils": masking_utils}

    def files(self):
        return {source_path(k): k for k in MODULES}

    def dump_text(self, case, raw):
        return self.dump.dumps_fixture(self.dump.dump_case(case, raw), pretty=True)

    def baseline(self):
        """Checks that the unmutated release reproduces its fixtures and the crosscheck is clean, and
        measures which lines of the two modules each case executes (dump, crosscheck, behaviour probe)."""
        files = self.files()
        lines = set()
        tracer = line_tracer(files, lines)

        def traced(fn):
            lines.clear()
            sys.settrace(tracer)
            try:
                r = fn()
            finally:
                sys.settrace(None)
            return r, sorted(lines)

        cov = {"probe": None, "golden": {}, "crosscheck": {}, "seconds": {"golden": {}, "crosscheck": {}}}
        self.dump.API = None
        t0 = time.monotonic()
        _, cov["probe"] = traced(self.dump.api)
        cov["seconds"]["probe"] = time.monotonic() - t0
        stale, dirty = [], []
        for name, case, raw, text in self.cases:
            t0 = time.monotonic()
            got, cov["golden"][name] = traced(lambda: self.dump_text(case, raw))
            t1 = time.monotonic()
            if got != text:
                stale.append(name)
            (_, problems), cov["crosscheck"][name] = traced(lambda: self.cc.check(case, raw, self.fixtures))
            cov["seconds"]["golden"][name] = t1 - t0
            cov["seconds"]["crosscheck"][name] = time.monotonic() - t1
            if problems:
                dirty.append(f"{name}: {problems[0]}")
        return cov, stale, dirty

    def run_mutant(self, mutant, cov, deadline_case=None):
        """In the child: -> result dict (killed_by, case, where) for the first difference, or survived."""
        install(mutant, self.modules)
        line = (mutant.target.module, mutant.site.stmt_line)
        self.dump.API = None
        probe = line in cov["probe_set"]
        golden = [c for c in self.cases if line in cov["golden_set"][c[0]]]
        cross = [c for c in self.cases if line in cov["crosscheck_set"][c[0]]]
        if probe and not golden:
            golden = self.cases[:1]  # the behaviours the probe measures are recorded in every fixture
        ran = 0
        for name, case, raw, text in golden:
            ran += 1
            try:
                got = self.dump_text(case, raw)
            except Exception as e:
                return {"status": "killed", "killed_by": "golden", "case": name,
                        "where": f"the dump raised {type(e).__name__}: {str(e)[:200]}", "ran": ran}
            if got != text:
                return {"status": "killed", "killed_by": "golden", "case": name, "where": first_difference(text, got),
                        "ran": ran}
        for name, case, raw, text in cross:
            ran += 1
            try:
                _, problems = self.cc.check(case, raw, self.fixtures)
            except Exception as e:
                problems = [f"the crosscheck raised {type(e).__name__}: {str(e)[:200]}"]
            if problems:
                return {"status": "killed", "killed_by": "crosscheck", "case": name, "where": problems[0][:300],
                        "ran": ran}
        return {"status": "survived", "ran": ran, "executed": bool(golden or cross or probe)}


def first_difference(want_text, got_text):
    """The JSON path of the first field where a mutant's fixture differs from the committed one."""
    try:
        want, got = json.loads(want_text), json.loads(got_text)
    except ValueError:
        return "the fixture text"

    def walk(a, b, path):
        if type(a) is not type(b):
            return path or "/"
        if isinstance(a, dict):
            for k in list(a) + [k for k in b if k not in a]:
                if k not in a or k not in b:
                    return f"{path}/{k}"
                r = walk(a[k], b[k], f"{path}/{k}")
                if r:
                    return r
            return None
        if isinstance(a, list):
            for i, (x, y) in enumerate(zip(a, b)):
                r = walk(x, y, f"{path}/{i}")
                if r:
                    return r
            return f"{path} (length {len(a)} vs {len(b)})" if len(a) != len(b) else None
        return None if a == b else (path or "/")

    return walk(want, got, "") or "the fixture text (formatting)"


def mutated_lines(mutant):
    """The lines whose execution can tell the mutant apart: the mutated statement's line, or for a
    dropped compound statement (if, for, while, with, try) the lines of its body."""
    module = mutant.target.module
    node = _get(mutant.target.node, mutant.site.path)
    if mutant.site.op == "drop" and isinstance(node, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
        return {(module, n) for n in range(node.lineno + 1, node.end_lineno + 1)}
    return {(module, mutant.site.stmt_line)}


# --------------------------------------------------------------------------------------------
# the second part: transformers' own tests (--upstream-tests DIR)
# --------------------------------------------------------------------------------------------
class Upstream:
    """transformers' own cache and mask unit tests (tests/utils/test_cache_utils.py and
    test_masking_utils.py of a checkout at the release's tag; any test_*.py of DIR), run by pytest
    in-process in the forked child that has the mutant bound. Only the tests that pass on the unmutated
    release count; a mutant is killed by "upstream" when one of them fails. Which of them execute which
    line is measured at the baseline, as for the cases: a mutant runs only the tests that reach it."""

    def __init__(self, folder):
        self.dir = os.path.abspath(folder)
        self.files = sorted(os.path.join(self.dir, f) for f in os.listdir(self.dir)
                            if f.startswith("test_") and f.endswith(".py")) if os.path.isdir(self.dir) else []
        if not self.files:
            raise SystemExit(f"mutate: --upstream-tests {folder}: no test_*.py files there")
        h = hashlib.sha256(CAMPAIGN_VERSION.encode())
        for f in self.files:
            h.update(os.path.basename(f).encode() + b"\0" + sha_file(f).encode())
        self.key = h.hexdigest()  # part of every upstream result's key: changed tests run every mutant again
        self.baseline = None

    def pytest(self, args, plugin):
        import pytest
        # what the process holds (torch, transformers, the cases and fixtures) out of the collector's
        # reach: transformers' mask tests call gc.collect() in tearDown, 5 s each without this
        gc.freeze()
        # offline (main() sets HF_HUB_OFFLINE before transformers is imported), quiet, no cache folder
        # in the tests' directory, nothing from an ini file of the folder it was copied from
        return pytest.main(["-p", "no:cacheprovider", "-q", "-o", "addopts=", "--rootdir", self.dir,
                            "-W", "ignore", *args], plugins=[plugin])

    def run_baseline(self, files):
        """In a child: every test on the unmutated release -> {nodeid: {outcome, why, seconds, lines}}."""
        import pytest
        import torch._dynamo.utils as dynamo_utils

        lines = set()
        tracer = line_tracer(files, lines)

        tests = {}

        class Recorder:
            @pytest.hookimpl(hookwrapper=True)
            def pytest_runtest_protocol(self, item, nextitem):
                lines.clear()
                frames = sum(dynamo_utils.counters["frames"].values())
                t0 = time.monotonic()
                sys.settrace(tracer)
                try:
                    yield
                finally:
                    sys.settrace(None)
                t = tests.setdefault(item.nodeid, {"outcome": "passed", "why": None})
                t["seconds"] = round(time.monotonic() - t0, 3)
                t["lines"] = sorted(lines)
                # a test during which torch.compile compiled: its compiled part runs no traced line, and
                # compiling takes minutes on the CPU (measured: 51 to 348 s for 5.25.0's mask tests), so
                # it does not run per mutant (the report counts such tests)
                t["compiled"] = sum(dynamo_utils.counters["frames"].values()) > frames

            def pytest_runtest_logreport(self, report):
                t = tests.setdefault(report.nodeid, {"outcome": "passed", "why": None})
                if report.skipped and t["outcome"] == "passed":
                    t["outcome"] = "skipped"
                    t["why"] = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
                elif report.failed and t["outcome"] != "failed":
                    t["outcome"] = "failed"
                    crash = getattr(report.longrepr, "reprcrash", None)
                    t["why"] = (crash.message if crash else str(report.longrepr)).strip()[:300]

        code = self.pytest(self.files, Recorder())
        return {"exit": int(code), "tests": tests}

    def warm(self):
        """In the parent: imports what the test files import (transformers' auto classes, pipelines: seconds
        each), so that each mutant's child does not import it again. install() rebinds the mutated function
        in these modules too, as in every dict that holds it."""
        for f in self.files:
            with open(f, encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and not node.level):
                    try:
                        exec(compile(ast.Module(body=[node], type_ignores=[]), f, "exec"), {})
                    except Exception:
                        pass  # the test's own import error shows in the baseline

    def run_mutant(self, mutant, modules):
        """In the child: the baseline-passing tests that reach the mutant; the first failure kills it."""
        import pytest

        lines = mutated_lines(mutant)
        chosen = [n for n, t in self.baseline["tests"].items() if t["outcome"] == "passed"
                  and not t.get("compiled") and any(tuple(x) in lines for x in t["lines"])]
        if not chosen:
            return {"status": "survived", "ran": 0, "executed": False}
        install(mutant, modules)
        failed = []

        class Recorder:
            def pytest_runtest_logreport(self, report):
                if report.failed and not failed:
                    crash = getattr(report.longrepr, "reprcrash", None)
                    failed.append((report.nodeid, (crash.message if crash else str(report.longrepr)).strip()[:300]))

        code = self.pytest(["-x", *(os.path.join(self.dir, n) for n in chosen)], Recorder())  # ids are rootdir's
        if failed:
            return {"status": "killed", "killed_by": "upstream", "case": failed[0][0], "where": failed[0][1],
                    "ran": len(chosen)}
        if int(code) not in (0, 5):  # collection failed under the mutant: a test file's import
            return {"status": "killed", "killed_by": "upstream", "case": None,
                    "where": f"pytest exited {int(code)} without a failing test", "ran": len(chosen)}
        return {"status": "survived", "ran": len(chosen), "executed": True}

    def summary(self):
        """-> (passed, failed, skipped, [(outcome, class, count)]) of the baseline."""
        counts = {}
        for t in self.baseline["tests"].values():
            if t["outcome"] != "passed":
                k = (t["outcome"], upstream_reason(t["outcome"], t["why"] or ""))
                counts[k] = counts.get(k, 0) + 1
        n = {o: sum(1 for t in self.baseline["tests"].values() if t["outcome"] == o)
             for o in ("passed", "failed", "skipped")}
        return n["passed"], n["failed"], n["skipped"], sorted((o, c, k) for (o, c), k in counts.items())

    def compiled(self):
        """How many passing tests compiled with torch.compile (not run per mutant)."""
        return sum(1 for t in self.baseline["tests"].values() if t["outcome"] == "passed" and t.get("compiled"))


def upstream_reason(outcome, why):
    """The class of a test that does not pass on the unmutated release (the report's baseline line)."""
    w = why.lower()
    if outcome == "skipped":
        if "accelerator" in w or "gpu" in w or "cuda" in w:
            return "needs an accelerator"
        if "slow" in w:
            return "slow (RUN_SLOW)"
        if "not available" in w:
            return "needs an optional package"
        return "skipped by the test itself"
    if "offline" in w or "huggingface.co" in w or "hub" in w or "connect" in w or "local_files_only" in w:
        return "needs the Hub (offline)"
    return "fails on the release"


# --------------------------------------------------------------------------------------------
# running: forked children, a results file
# --------------------------------------------------------------------------------------------
def in_child(job, out_path):
    """Runs in a forked child: one job, its result written to out_path (atomically)."""
    kind, mutant, ctx = job
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    try:
        if kind == "upstream":
            r = ctx["upstream"].run_mutant(mutant, ctx["harness"].modules)
        else:
            r = ctx["harness"].run_mutant(mutant, ctx["cov"])
    except BaseException as e:  # the harness itself failed under the mutant (an import, a recursion)
        r = {"status": "killed", "killed_by": "upstream" if kind == "upstream" else "golden", "case": None,
             "where": f"{type(e).__name__}: {str(e)[:200]}"}
    with open(out_path + ".tmp", "w") as f:
        json.dump(r, f)
    os.replace(out_path + ".tmp", out_path)


def fork_call(fn):
    """fn() in a forked child (what it imports and binds stays there) -> its JSON-able result, or None."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(2, 1)  # what pytest prints goes with the progress, not into the report on stdout
        code = 0
        try:
            data = json.dumps(fn()).encode()
            with os.fdopen(w, "wb") as f:
                f.write(data)
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 3
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data) if data else None


def run_jobs(jobs, n_parallel, timeout, tmpdir, on_result):
    """Forks one child per job, at most n_parallel at once; a child past timeout is killed."""
    pending = list(jobs)
    running = {}
    while pending or running:
        while pending and len(running) < n_parallel:
            job = pending.pop(0)
            out = os.path.join(tmpdir, f"{os.getpid()}-{len(pending)}-{job[0]}.json")
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    in_child(job, out)
                except BaseException:
                    code = 3
                os._exit(code)
            running[pid] = (job, out, time.monotonic(), timeout(job))
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            now = time.monotonic()
            for p, (job, out, t0, limit) in list(running.items()):
                if now - t0 > limit:
                    os.kill(p, 9)
            time.sleep(0.02)
            continue
        if pid not in running:
            continue
        job, out, t0, limit = running.pop(pid)
        secs = time.monotonic() - t0
        if os.path.isfile(out):
            with open(out) as f:
                r = json.load(f)
            os.remove(out)
        elif os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9 and secs > limit:
            r = {"status": "killed", "killed_by": "timeout", "where": f"ran past {limit:.0f} s"}
        else:
            r = {"status": "killed", "killed_by": "crash", "where": f"the child ended with status {status}"}
        r["seconds"] = round(secs, 2)
        on_result(job, r)


def source_path(module):
    """The installed transformers' module file, found without importing it (an import of torch costs seconds)."""
    import importlib.util
    return os.path.join(importlib.util.find_spec("transformers").submodule_search_locations[0], module + ".py")


def sha_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


CODE_FILES = ("dump.py", "crosscheck_masks.py", "kvc_inputs.py", "cpu_pin.py")


def code_key():
    """The harness code a result depends on."""
    return hashlib.sha256("".join(sha_file(os.path.join(HERE, f)) for f in CODE_FILES).encode()).hexdigest()


def inputs_key(harness):
    h = hashlib.sha256()
    for name, case, raw, text in sorted(harness.cases, key=lambda c: c[0]):
        h.update(name.encode() + b"\0" + hashlib.sha256(raw).digest() + hashlib.sha256(text.encode()).digest())
    for f in CODE_FILES:
        h.update(sha_file(os.path.join(HERE, f)).encode())
    return h.hexdigest()


def kill_key(mutant, harness, case_name, code):
    """What a kill by one case depends on: the mutant, that case and its fixture, the harness code. A
    mutant a case killed stays killed when other cases are added or changed."""
    c = harness.by_name.get(case_name)
    if c is None:
        return None
    return hashlib.sha256("\0".join((CAMPAIGN_VERSION, mutant.id, mutant.sha, mutant.module_sha, code, case_name,
                                     hashlib.sha256(c[2]).hexdigest(), hashlib.sha256(c[3].encode()).hexdigest())
                                    ).encode()).hexdigest()


def committed_results_path(release):
    return os.path.join(HERE, "mutation", f"{release}.results.jsonl")


def save_results(path, rows):
    """Writes the documented results (`rows`: result dicts) into the committed file, keeping its lines
    for other mutants: one line per mutant and part, sorted by id (the same rows write the same bytes)."""
    keep = {(r["id"], r["part"]): r for r in result_lines(path)}
    for r in rows:
        keep[(r["id"], r["part"])] = r
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for k in sorted(keep):
            f.write(json.dumps(keep[k], sort_keys=True) + "\n")
    os.replace(tmp, path)


def result_lines(path):
    """The results of a JSON-lines file, in its order (none when it is absent)."""
    if not os.path.isfile(path):
        return
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    yield json.loads(line)
                except ValueError:
                    continue  # a line cut short by an interrupted run: that mutant runs again


def load_results(path):
    out = {}
    for r in result_lines(path):
        out[(r["key"], r["part"])] = r
        out[("any:" + r["id"], r["part"])] = r
        if r.get("kill_key"):
            out[("id:" + r["id"], r["part"])] = r
    return out


# --------------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------------
def load_judgements(release):
    path = os.path.join(HERE, "mutation", f"{release}.json")
    if not os.path.isfile(path):
        return path, {}
    with open(path) as f:
        data = json.load(f)
    out = {}
    for i, j in enumerate(data.get("survivors", [])):
        for field in ("id", "sha", "class", "why"):
            if field not in j:
                raise SystemExit(f"mutate: {path}: /survivors/{i}: missing field '{field}'")
        if j["class"] not in ("equivalent", "gap"):
            raise SystemExit(f"mutate: {path}: /survivors/{i}/class: '{j['class']}' is not 'equivalent' or 'gap'")
        out[j["id"]] = j
    return path, out


def reached(mutant, cov):
    """Whether any case executes what the mutant changes: the mutated statement's line, or for a
    dropped compound statement (if, for, while, with, try) a line of its body."""
    return not mutated_lines(mutant).isdisjoint(cov["all"])


def classify(mutants, results, judgements, cov):
    rows = []
    for m in mutants:
        r = results.get((m.key, "kvconform"))
        if r is None:
            continue
        row = {"mutant": m, "r": r, "class": None, "why": None}
        if r["status"] == "survived":
            j = judgements.get(m.id)
            if j and j["sha"] == m.sha[:16]:
                row["class"], row["why"] = j["class"], j["why"]
            elif not r.get("executed") or (cov is not None and not reached(m, cov)):
                node = _get(m.target.node, m.site.path)
                row["class"], row["why"] = "gap", (
                    f"no case enters this block (lines {node.lineno + 1}-{node.end_lineno})"
                    if r.get("executed") else "no case executes this line")
            else:
                row["class"] = "unexplained"
                if j:
                    row["why"] = f"judged for another version of this mutant (sha {j['sha']})"
        rows.append(row)
    return rows


def render(release, rows, args, total_mutants, n_chosen, n_cases, upstream=None):
    out = []
    w = out.append
    killed = [x for x in rows if x["r"]["status"] == "killed"]
    equiv = [x for x in rows if x["class"] == "equivalent"]
    gaps = [x for x in rows if x["class"] == "gap"]
    unexplained = [x for x in rows if x["class"] == "unexplained"]
    nonequiv = len(rows) - len(equiv)
    rate = 100.0 * len(killed) / nonequiv if nonequiv else 100.0
    w(f"## transformers {release}\n\n")
    chosen = f"a sample of {args.sample} drawn by seed {args.seed}" if args.sample else "all of them"
    ran = f"{len(rows)} run" if len(rows) == n_chosen else \
        f"{len(rows)} of them run so far (in an order drawn by seed {args.seed}, so a random sample; the rest not yet run)"
    w(f"Mutants: {total_mutants} in the mutated functions"
      + (f" matching `{args.only}`" if args.only else "") + f"; chosen: {chosen}; {ran}; against {n_cases} cases. ")
    w(f"Killed by kvconform: **{len(killed)}**; equivalent: {len(equiv)}; gaps: {len(gaps)}; unexplained: "
      f"{len(unexplained)}. Kill rate of the non-equivalent mutants: **{rate:.1f} %** ({len(killed)} of {nonequiv}).\n\n")
    by = {}
    for x in killed:
        by[x["r"]["killed_by"]] = by.get(x["r"]["killed_by"], 0) + 1
    w("Killed by: " + ", ".join(f"{k} {v}" for k, v in sorted(by.items())) + ".\n\n")
    timed = [x["r"]["seconds"] for x in rows if "seconds" in x["r"]]
    if timed:
        def mean(xs):
            return f"{sum(xs) / len(xs):.1f} s" if xs else "none"
        w(f"Time per mutant (the child's wall time, as each result recorded it): {mean(timed)} on average; "
          f"{mean([x['r']['seconds'] for x in killed if 'seconds' in x['r']])} for a killed one, "
          f"{mean([x['r']['seconds'] for x in rows if x['r']['status'] == 'survived' and 'seconds' in x['r']])} "
          "for a survivor (it runs every case reaching its line).\n\n")
    if upstream is None:
        w("transformers' own cache and mask tests (tests/utils/test_cache_utils.py, test_masking_utils.py) are "
          "in neither the release's wheel nor its sdist, so they are not run beside it here (`--upstream-tests "
          "DIR` runs them from a checkout of the release's tag).\n\n")
    else:
        passed, failed, skipped, why = upstream.summary()
        w("Side by side: transformers' own tests (" + ", ".join(f"`{os.path.basename(f)}` (sha256 {sha_file(f)[:16]})"
                                                          for f in upstream.files)
          + f") on the unmutated release: {passed} passed, {failed} failed, {skipped} skipped"
          + "".join(f" ({'; '.join(f'{c}, {o}: {k}' for o, c, k in why)})" for _ in why[:1])
          + f". {upstream.compiled()} of the {passed} that pass compile with torch.compile (minutes each on the "
          f"CPU, and what they compile runs no traced line): they do not run per mutant. The other "
          f"{passed - upstream.compiled()} count: a mutant is killed by upstream when one of them fails (offline, "
          "on the CPU, each mutant running those that execute its line).\n\n")
        up = [x for x in rows if x.get("up")]
        kv_k = {id(x) for x in up if x["r"]["status"] == "killed"}
        up_k = {id(x) for x in up if x["up"]["status"] == "killed"}
        ids = {id(x) for x in up}
        neither = ids - kv_k - up_k
        neq = sum(1 for x in up if id(x) in neither and x["class"] == "equivalent")
        w(f"Of the {len(up)} mutants both parts ran: killed by kvconform only **{len(kv_k - up_k)}**, by upstream "
          f"only **{len(up_k - kv_k)}**, by both {len(kv_k & up_k)}, by neither {len(neither)} ({neq} of them "
          f"equivalent). Upstream alone kills {len(up_k)} of the {len(up) - neq} non-equivalent "
          f"({100.0 * len(up_k) / max(1, len(up) - neq):.1f} %)"
          + (f"; {len(rows) - len(up)} mutants have no upstream result yet" if len(up) < len(rows) else "") + ".\n\n")
    head = "| function | mutants | killed by kvconform | equivalent | gaps | unexplained |" + \
        (" killed by upstream |" if upstream else "") + "\n"
    w(head)
    w("|" + " --- |" * (head.count("|") - 1) + "\n")
    funcs = {}
    for x in rows:
        funcs.setdefault(f"{x['mutant'].target.module}.{x['mutant'].target.qual}", []).append(x)
    for f in sorted(funcs):
        xs = funcs[f]
        k = sum(1 for x in xs if x["r"]["status"] == "killed")
        cells = [f"`{f}`", str(len(xs)), str(k)]
        cells += [str(sum(1 for x in xs if x["class"] == c)) for c in ("equivalent", "gap", "unexplained")]
        if upstream:
            cells.append(upstream_cell(xs))
        w("| " + " | ".join(cells) + " |\n")
    tot = ["**total**", str(len(rows)), str(len(killed)), str(len(equiv)), str(len(gaps)), str(len(unexplained))]
    if upstream:
        tot.append(upstream_cell(rows))
    w("| " + " | ".join(tot) + " |\n\n")
    surv = [x for x in rows if x["r"]["status"] == "survived"]
    if surv:
        w(f"### Survivors of {release}\n\n")
        for x in surv:
            m = x["mutant"]
            u = x.get("up")
            w(f"- `{m.id}` (sha {m.sha[:16]}), **{x['class']}**{': ' + x['why'] if x['why'] else ''}"
              + (f"; upstream kills it (`{u['case']}`)" if u and u["status"] == "killed" else "") + "\n\n")
            w("  ```diff\n")
            for line in m.diff().splitlines():
                w(f"  {line}\n")
            w("  ```\n\n")
    return "".join(out), rate


def upstream_cell(xs):
    """The upstream column: killed of those with an upstream result (and how many lack one)."""
    have = [x for x in xs if x.get("up")]
    cell = str(sum(1 for x in have if x["up"]["status"] == "killed"))
    return cell + (f" (of {len(have)})" if len(have) < len(xs) else "")


def write_doc(path, release, section):
    begin, end = f"<!-- mutate_transformers {release} begin -->\n", f"<!-- mutate_transformers {release} end -->\n"
    text = ""
    if os.path.isfile(path):
        with open(path) as f:
            text = f.read()
    if begin in text and end in text:
        a, rest = text.split(begin, 1)
        _, b = rest.split(end, 1)
        text = a + begin + section + end + b
    else:
        if not text:
            text = DOC_HEAD
        text += "\n" + begin + section + end
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


DOC_HEAD = """# Mutants of transformers itself

How much of a transformers release's cache and mask behaviour kvconform's fixtures pin down, measured by
mutating the release's own source (`golden/mutate_transformers.py`, see golden/README.md "Mutation
campaign"): every mutant is a one-place change to a function of `cache_utils.py` (the layer mixin,
the dynamic, static and sliding layers) or `masking_utils.py` (the overlays, the padding mask, the SDPA
skip rule, `sdpa_mask`, `eager_mask`, the causal, sliding and chunked mask builders). A mutant is
killed when the golden dump of a case differs from the release's committed fixture (golden replay is
bitwise, so `kvconform run` would report it) or when the mask crosscheck fails. Each survivor is
listed with its diff and classified: `equivalent` (no input can tell it apart, with the evidence),
`gap` (what kvconform would have to drive to tell it apart), or `unexplained` (not judged yet).

The sections below are written by the command (`--doc`); the judgements come from
`golden/mutation/<release>.json`.
"""


# --------------------------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(description="mutation campaign against the installed transformers' cache and mask code")
    ap.add_argument("--release", help="pinned release (golden/requirements-X.txt); default: the installed one")
    ap.add_argument("--seed", type=int, default=1, help="seed of the --sample draw (default 1)")
    ap.add_argument("--sample", type=int, default=0, help="run N mutants drawn by --seed (default: every mutant)")
    ap.add_argument("--only", help="regex on 'module:Class.method' / 'module:function': mutate only those")
    ap.add_argument("--mutant", action="append", metavar="ID", help="run this mutant (an id of --list); repeatable")
    ap.add_argument("--jobs", type=int, default=max(1, min(2, os.cpu_count() or 1)), help="mutants run at once (default 2)")
    ap.add_argument("--timeout", type=float, help="seconds a mutant may run before it counts as killed (timeout); default: "
                    "ten times what the unmutated release took on the cases it runs, at least 120")
    ap.add_argument("--cases", nargs="+", default=[os.path.join(ROOT, "cases"), os.path.join(ROOT, "cases", "generated")],
                    help="case files or folders (default: cases/ cases/generated/)")
    ap.add_argument("--results", help="results file, JSON lines (default: build/mutate-transformers/<release>.jsonl)")
    ap.add_argument("--doc", metavar="FILE", help="write the release's section of this Markdown file (e.g. docs/transformers-mutants.md)")
    ap.add_argument("--json", metavar="FILE", help="write the per-mutant results as JSON")
    ap.add_argument("--list", action="store_true", help="list the mutants (id and diff) and exit")
    ap.add_argument("--no-run", action="store_true", help="run nothing: report the results kept in --results")
    ap.add_argument("--kept-only", action="store_true",
                    help="run only the mutants the results file has a result for, under any inputs (after cases changed)")
    ap.add_argument("--min-kill-rate", type=float, help="exit 1 when the kill rate of non-equivalent mutants is below this percentage")
    ap.add_argument("--upstream-tests", metavar="DIR",
                    help="also run transformers' own tests in DIR (test_*.py: tests/utils/test_cache_utils.py and "
                    "test_masking_utils.py of a checkout at the release's tag) on each mutant, side by side (needs pytest)")
    ap.add_argument("--part", choices=("kvconform", "upstream"),
                    help="run only this part; upstream: on the mutants whose kvconform result is kept")
    args = ap.parse_args(argv)
    if args.upstream_tests:
        # before transformers (and huggingface_hub, which reads it at import) is imported: a test that
        # needs a download fails at once, and is left out of what counts
        os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"

    from importlib.metadata import PackageNotFoundError, version

    try:
        here = version("transformers")
    except PackageNotFoundError:
        here = None
    release = args.release or here
    if release is None:
        ap.error("no transformers installed here: name a pinned release with --release")
    if here != release:
        py = os.path.join(HERE, f".venv-{release}", "bin", "python")
        if not os.path.isfile(py):
            print(f"mutate: no golden/.venv-{release}; run: bash golden/setup_env.sh {release}", file=sys.stderr)
            return 2
        os.execv(py, [py, os.path.abspath(__file__)] + (argv if argv is not None else sys.argv[1:]))
    if args.jobs < 1 or args.sample < 0 or (args.timeout is not None and args.timeout <= 0):
        ap.error("--jobs and --timeout must be positive, --sample not negative")
    if args.part == "upstream" and not args.upstream_tests:
        ap.error("--part upstream needs --upstream-tests DIR")
    upstream = Upstream(args.upstream_tests) if args.upstream_tests else None
    if upstream:
        try:
            import pytest  # noqa: F401  (the child runs it)
        except ImportError:
            print(f"mutate: --upstream-tests needs pytest (and what the tests import, e.g. parameterized) in "
                  f"golden/.venv-{release} or on PYTHONPATH", file=sys.stderr)
            return 2

    t0 = time.monotonic()
    harness = Harness(release, args.cases)
    sources = {}
    for k in MODULES:
        with open(source_path(k), encoding="utf-8") as f:
            text = f.read()
        sources[k] = (text, hashlib.sha256(text.encode()).hexdigest())
    ikey = inputs_key(harness)
    mutants = enumerate_mutants(sources, release, ikey, args.only)
    total = len(mutants)
    if args.mutant:
        ids = {m.id for m in mutants}
        unknown = [i for i in args.mutant if i not in ids]
        if unknown:
            ap.error(f"--mutant {unknown[0]}: no such mutant of {release} (see --list)")
        mutants = [m for m in mutants if m.id in set(args.mutant)]
    elif args.sample and args.sample < total:
        keep = set(random.Random(args.seed).sample(range(total), args.sample))
        mutants = [m for i, m in enumerate(mutants) if i in keep]
    if args.list:
        for m in mutants:
            print(m.id)
            print("  " + m.diff().replace("\n", "\n  "))
        return 0

    results_path = args.results or os.path.join(ROOT, "build", "mutate-transformers", f"{release}.jsonl")
    os.makedirs(os.path.dirname(os.path.abspath(results_path)), exist_ok=True)
    # The documented run's results, committed (a fresh checkout regenerates the report and resumes the
    # campaign from them), under the working file's; a run with its own --results file stands alone.
    committed = None if args.results else committed_results_path(release)
    results = load_results(committed) if committed else {}
    results.update(load_results(results_path))
    parts = ["kvconform", "upstream"] if upstream else ["kvconform"]
    if args.part:
        parts = [args.part]

    def key(m, part):
        return m.key if part == "kvconform" else hashlib.sha256((m.key + "\0" + upstream.key).encode()).hexdigest()

    code = code_key()
    todo = []  # a kill by a case whose case file and fixture are unchanged stands (kill_key)
    waiting = 0
    for m in mutants:
        for p in parts:
            if (key(m, p), p) in results:
                continue
            if p == "upstream" and args.part == "upstream" and (m.key, "kvconform") not in results:
                waiting += 1  # compared on the mutants the kvconform part ran
                continue
            prior = results.get(("id:" + m.id, p))
            k = prior and prior.get("kill_key")
            if k and k == kill_key(m, harness, prior.get("case"), code):
                results[(m.key, p)] = dict(prior, key=m.key)  # the kill stands under the current inputs
                continue
            todo.append((p, m))
    if args.no_run:
        todo = []
    n_chosen = len(mutants)
    if args.kept_only:
        todo = [(p, m) for p, m in todo if ("any:" + m.id, p) in results]
        mutants = [m for m in mutants if any(("any:" + m.id, p) in results for p in parts)]
    # in an order drawn by --seed: a campaign stopped part way has run a random sample of its mutants
    random.Random(args.seed).shuffle(todo)
    print(f"mutate {release}: {len(mutants)} mutants of {total} ({len(harness.cases)} cases), "
          f"{len(todo)} runs to do, {len(mutants) * len(parts) - len(todo) - waiting} kept in {results_path}"
          + (f", {waiting} wait for their kvconform result" if waiting else ""), file=sys.stderr)

    ctx = {"harness": harness}
    # the coverage of the unmutated release, kept beside the results (keyed like them): which cases a
    # mutant runs, and which survivors no case reaches
    cov_path = os.path.join(os.path.dirname(os.path.abspath(results_path)), f"{release}-coverage-"
                            f"{hashlib.sha256((ikey + sources['cache_utils'][1] + sources['masking_utils'][1]).encode()).hexdigest()[:16]}.json")
    cov = None
    if os.path.isfile(cov_path):
        with open(cov_path) as f:
            cov = json.load(f)
    if todo or (cov is None and any(results.get((m.key, "kvconform"), {}).get("status") == "survived" for m in mutants)):
        harness.load()
        ctx["upstream"] = upstream
        if cov is None:
            print(f"mutate {release}: baseline (the unmutated release, line coverage per case)...", file=sys.stderr)
            cov, stale, dirty = harness.baseline()
            if stale or dirty:
                for s in stale[:10]:
                    print(f"mutate: {s}: the unmutated {release} does not reproduce its committed fixture", file=sys.stderr)
                for s in dirty[:10]:
                    print(f"mutate: crosscheck of the unmutated release: {s}", file=sys.stderr)
                print(f"mutate: {len(stale)} stale fixtures, {len(dirty)} crosscheck problems: re-dump the fixtures "
                      "(golden/README.md) before a campaign", file=sys.stderr)
                return 2
            with open(cov_path + ".tmp", "w") as f:
                json.dump(cov, f)
            os.replace(cov_path + ".tmp", cov_path)
    if cov is not None:
        cov["probe_set"] = {tuple(x) for x in cov["probe"]}
        for part in ("golden", "crosscheck"):
            cov[part + "_set"] = {n: {tuple(x) for x in ls} for n, ls in cov[part].items()}
        cov["all"] = set(cov["probe_set"]).union(*cov["golden_set"].values(), *cov["crosscheck_set"].values())
        ctx["cov"] = cov
    if upstream:
        # the upstream tests on the unmutated release, kept beside the results (keyed by the test files
        # and the two modules): which pass, and which lines each executes
        up_path = os.path.join(os.path.dirname(os.path.abspath(results_path)), f"{release}-upstream-" + hashlib.sha256(
            (upstream.key + sources["cache_utils"][1] + sources["masking_utils"][1]).encode()).hexdigest()[:16] + ".json")
        if os.path.isfile(up_path):
            with open(up_path) as f:
                upstream.baseline = json.load(f)
        else:
            if harness.modules is None:
                harness.load()
            print(f"mutate {release}: upstream baseline (the tests of {upstream.dir} on the unmutated release)...",
                  file=sys.stderr)
            upstream.baseline = fork_call(lambda: upstream.run_baseline(harness.files()))
            if upstream.baseline is None or upstream.baseline["exit"] not in (0, 1):
                print(f"mutate: pytest could not run {upstream.dir} on the unmutated release "
                      f"(exit {upstream.baseline and upstream.baseline['exit']})", file=sys.stderr)
                return 2
            with open(up_path + ".tmp", "w") as f:
                json.dump(upstream.baseline, f)
            os.replace(up_path + ".tmp", up_path)
        passed, failed, skipped, why = upstream.summary()
        print(f"mutate {release}: upstream baseline: {passed} passed, {failed} failed, {skipped} skipped"
              + "".join(f" ({'; '.join(f'{c}, {o}: {k}' for o, c, k in why)})" for _ in why[:1]), file=sys.stderr)

    done = [0]
    with open(results_path, "a") as out:
        def on_result(job, r):
            part, m = job[0], job[1]
            r.update({"key": key(m, part), "part": part, "id": m.id, "release": release})
            if r["status"] == "killed" and r.get("case") and part == "kvconform":
                r["kill_key"] = kill_key(m, harness, r["case"], code)
            out.write(json.dumps(r, sort_keys=True) + "\n")
            out.flush()
            results[(key(m, part), part)] = r
            done[0] += 1
            print(f"mutate {release}: [{done[0]}/{len(todo)}] {m.id} {part}: {r['status']}"
                  + (f" by {r['killed_by']} ({r.get('case')})" if r["status"] == "killed" else "")
                  + f" {r.get('seconds', 0)} s", file=sys.stderr)

        tmpdir = os.path.join(os.path.dirname(os.path.abspath(results_path)), "tmp")
        os.makedirs(tmpdir, exist_ok=True)
        def limit(job):
            part, m = job[0], job[1]
            if args.timeout:
                return args.timeout
            if part == "upstream":
                lines = mutated_lines(m)
                t = sum(t["seconds"] for t in upstream.baseline["tests"].values() if t["outcome"] == "passed"
                        and not t.get("compiled") and any(tuple(x) in lines for x in t["lines"]))
                return max(120.0, 10 * t)
            secs = cov.get("seconds")
            if not secs:
                return 1800.0  # a baseline kept before timings were recorded
            line = (m.target.module, m.site.stmt_line)
            t = sum(secs["golden"].get(n, 0) for n in cov["golden_set"] if line in cov["golden_set"][n]) + \
                sum(secs["crosscheck"].get(n, 0) for n in cov["crosscheck_set"] if line in cov["crosscheck_set"][n])
            return max(120.0, 10 * (t + secs["probe"]))

        if upstream and any(p == "upstream" for p, _ in todo):
            upstream.warm()
        run_jobs([(p, m, ctx) for p, m in todo], args.jobs, limit, tmpdir, on_result)

    jpath, judgements = load_judgements(release)
    rows = classify(mutants, results, judgements, cov)
    if upstream:
        for x in rows:
            x["up"] = results.get((key(x["mutant"], "upstream"), "upstream"))
    section, rate = render(release, rows, args, total, n_chosen, len(harness.cases), upstream)
    if args.doc:
        write_doc(args.doc, release, section)
        if committed:
            save_results(committed, [r for x in rows for r in (x["r"], x.get("up")) if r])
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"id": x["mutant"].id, "sha": x["mutant"].sha[:16], "function": f"{x['mutant'].target.module}.{x['mutant'].target.qual}",
                        "op": x["mutant"].site.op, "kvconform": {k: v for k, v in x["r"].items() if k not in ("key", "seconds")},
                        **({"upstream": {k: v for k, v in x["up"].items() if k not in ("key", "seconds")} if x["up"] else None}
                           if upstream else {}),
                        "class": x["class"], "why": x["why"], "diff": x["mutant"].diff()} for x in rows], f, indent=1)
    killed = sum(1 for x in rows if x["r"]["status"] == "killed")
    unexplained = sum(1 for x in rows if x["class"] == "unexplained")
    print(f"mutate {release}: {len(rows)} mutants, {killed} killed, kill rate of non-equivalent {rate:.1f} %, "
          f"{unexplained} survivors unexplained ({time.monotonic() - t0:.0f} s)")
    if args.min_kill_rate is not None and rate < args.min_kill_rate:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
