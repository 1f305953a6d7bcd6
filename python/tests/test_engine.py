"""`kvconform.engine` and `kvconform.protocol` without the kvconform binary: what an Engine subclass
answers to each request, the precision of the load answer, the checks on what it returns, and the
worker process `python -m kvconform serve-engine` (a print at import goes to stderr)."""
import io
import json
import os
import struct
import subprocess
import sys
import textwrap
import types
import warnings

import pytest

import kvconform
from kvconform import protocol
from kvconform.engine import serve

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = 3


class Counting(kvconform.Engine):
    """Logits = the token id in every column: enough to see the bytes go through."""
    name, version, description = "counting", "1.0", "a test engine"
    operations = ("sequences",)

    def load(self, model_dir, options, mutant, max_tokens, sequences):
        self.loaded = (model_dir, dict(options), mutant, max_tokens, sequences)
        return VOCAB

    def extend(self, seq, tokens):
        return struct.pack(f"<{len(tokens) * VOCAB}f", *[float(t) for t in tokens for _ in range(VOCAB)])

    def reset(self):
        pass


def exchange(engine, *requests):
    """Serves engine on the requests; returns the replies (header, buffers)."""
    stdin, stdout = io.BytesIO(), io.BytesIO()
    for r in requests:
        protocol.send(stdin, r)
    stdin.seek(0)
    serve(engine, stdin=stdin, stdout=stdout)
    stdout.seek(0)
    replies = []
    while True:
        try:
            replies.append(protocol.receive(stdout))
        except protocol.Closed:
            return replies


LOAD = {"op": "load", "case": "engine/x/m/p", "model": "/m", "options": {"k": 1}, "mutant": "window_off_by_one+1",
        "max_tokens": 9, "sequences": 2}


def test_hello_load_extend_reset():
    e = Counting()
    (hello, _), (load, _), (ext, bufs), (reset, _) = exchange(
        e, {"op": "hello", "protocol": 1, "level": "engine"}, LOAD,
        {"op": "extend", "case": "c", "step": 0, "seq": 1, "tokens": [5, 7]}, {"op": "reset", "case": "c", "step": 1})
    assert hello == {"status": "ok", "name": "counting", "version": "1.0", "description": "a test engine",
                     "operations": ["sequences"]}
    assert load == {"status": "ok", "vocab": VOCAB}  # float32 everywhere: no precision field
    assert e.loaded == ("/m", {"k": 1}, "window_off_by_one+1", 9, 2)
    assert ext["status"] == "ok" and ext["buffers"] == [{"name": "logits", "dtype": "float32", "shape": [2, VOCAB],
                                                          "nbytes": 4 * 2 * VOCAB}]
    assert struct.unpack("<6f", bufs["logits"][2]) == (5, 5, 5, 7, 7, 7)
    assert reset == {"status": "ok"}


def test_precision_from_the_class_and_from_loaded():
    class Half(Counting):
        precision = {"kv": "float16"}

    class PerLoad(Half):
        def load(self, *args):
            super().load(*args)
            return kvconform.Loaded(VOCAB, {"q": "float16", "kv": "float16", "gelu": "float32"})

    assert exchange(Half(), LOAD)[0][0] == {"status": "ok", "vocab": VOCAB, "precision": {"kv": "float16"}}
    assert exchange(PerLoad(), LOAD)[0][0] == {"status": "ok", "vocab": VOCAB,
                                               "precision": {"q": "float16", "kv": "float16"}}

    class Quantized(Counting):  # llama.cpp's q8_0 K cache beside an f16 V: the block format per side
        precision = {"kv": "float16", "k": "q8_0", "q": "q8_0"}

    assert exchange(Quantized(), LOAD)[0][0]["precision"] == {"kv": "float16", "k": "q8_0", "q": "q8_0"}


@pytest.mark.parametrize("precision,words", [({"keys": "float16"}, "precision key 'keys': known are kv, q, gelu, k, v"),
                                             ({"kv": "bfloat16"}, "precision kv='bfloat16'"),
                                             ({"k": "float16"}, "precision k='float16': expected 'q8_0' or 'q4_0'")])
def test_a_wrong_precision_is_an_error_naming_it(precision, words):
    class Wrong(Counting):
        def load(self, *args):
            return kvconform.Loaded(VOCAB, precision)

    reply = exchange(Wrong(), LOAD)[0][0]
    assert reply["status"] == "error" and words in reply["error"] and "Wrong.load" in reply["error"], reply


def test_what_the_engine_returns_is_checked():
    class ShortLogits(Counting):
        def extend(self, seq, tokens):
            return b"\0" * 4

    class NoVocab(Counting):
        def load(self, *args):
            return None

    (_, _), (ext, _) = exchange(ShortLogits(), LOAD, {"op": "extend", "seq": 0, "tokens": [1, 2]})
    assert ext["status"] == "error" and "returned 4 bytes of logits, expected 24" in ext["error"], ext
    (load, _), = exchange(NoVocab(), LOAD)
    assert load["status"] == "error" and "NoVocab.load returned None" in load["error"], load


def test_unsupported_and_errors_keep_the_worker_alive():
    class Refuses(Counting):
        def extend(self, seq, tokens):
            raise RuntimeError("boom")

    replies = exchange(Refuses(), LOAD, {"op": "rollback", "seq": 0, "n": 1}, {"op": "extend", "seq": 0, "tokens": [1]},
                       {"op": "frobnicate"}, {"op": "reset"})
    assert [r["status"] for r, _ in replies] == ["ok", "unsupported", "error", "error", "ok"], replies
    assert replies[1][0]["error"] == "rollback is not supported"
    assert replies[2][0]["error"].startswith("RuntimeError: boom (test_engine.py:"), replies[2][0]
    assert "unknown op 'frobnicate'" in replies[3][0]["error"]


class Serving(Counting):
    """The serving operations on top of Counting: a spec cycle through the default extend + rollback."""
    operations = ("sequences", "rollback", "fork", "chunked", "spec", "batch", "shift")

    def rollback(self, seq, n):
        self.rolled = (seq, n)

    def fork(self, seq, source, length):
        self.forked = (seq, source, length)

    def shift(self, seq, keep, discard):
        self.shifted = (seq, keep, discard)

    def chunked(self, seq, tokens, chunk):
        self.chunk = chunk
        return kvconform.Rows([len(tokens) - 1], struct.pack(f"<{VOCAB}f", *[float(tokens[-1])] * VOCAB))

    def batch(self, items):
        return b"".join(self.extend(seq, tokens) for seq, tokens in items)


def test_the_serving_operations_and_a_subset_answer():
    e = Serving()
    (_, _), (fork, _), (shift, _), (chunked, cbufs), (spec, _), (batch, bbufs) = exchange(
        e, LOAD, {"op": "fork", "seq": 1, "from": 0, "length": 3}, {"op": "shift", "seq": 1, "keep": 1, "discard": 2},
        {"op": "chunked", "seq": 0, "tokens": [4, 5, 6], "chunk": 2}, {"op": "spec", "seq": 0, "tokens": [8, 9], "n": 1},
        {"op": "batch", "items": [{"seq": 0, "tokens": [1]}, {"seq": 1, "tokens": [2, 3]}]})
    assert fork == {"status": "ok"} and e.forked == (1, 0, 3)
    assert shift == {"status": "ok"} and e.shifted == (1, 1, 2)
    assert chunked["rows"] == [2] and chunked["buffers"][0]["shape"] == [1, VOCAB] and e.chunk == 2, chunked
    assert struct.unpack("<3f", cbufs["logits"][2]) == (6, 6, 6)
    assert spec["buffers"][0]["shape"] == [2, VOCAB] and "rows" not in spec and e.rolled == (0, 1), spec
    assert batch["buffers"][0]["shape"] == [3, VOCAB]
    assert struct.unpack("<9f", bbufs["logits"][2]) == (1, 1, 1, 2, 2, 2, 3, 3, 3)


def test_a_wrong_subset_is_an_error_naming_it():
    class BadRows(Serving):
        def chunked(self, seq, tokens, chunk):
            return kvconform.Rows([1, 0], b"")

    (_, _), (reply, _) = exchange(BadRows(), LOAD, {"op": "chunked", "seq": 0, "tokens": [4, 5], "chunk": 1})
    assert reply["status"] == "error" and "BadRows.chunked returned Rows([1, 0], ...): rows must be increasing" in reply["error"]
    (_, _), (reply, _) = exchange(Counting(), LOAD, {"op": "fork", "seq": 1, "from": 0, "length": 1})
    assert reply == {"status": "unsupported", "error": "fork is not supported"}
    (load, _), = exchange(Counting(), dict(LOAD, mutant="fork_off_by_one"))
    assert load == {"status": "unsupported", "error": "mutant fork_off_by_one: Counting has no fork operation"}, load
    (_, _), (reply, _) = exchange(Counting(), LOAD, {"op": "shift", "seq": 0, "keep": 0, "discard": 1})
    assert reply == {"status": "unsupported", "error": "shift is not supported"}
    (load, _), = exchange(Counting(), dict(LOAD, mutant="shift_not_rerotated"))
    assert load == {"status": "unsupported", "error": "mutant shift_not_rerotated: Counting has no shift operation"}, load


def test_a_log_probability_answer_names_its_buffer():
    class Server(Serving):
        def extend(self, seq, tokens):
            return kvconform.LogProbs([len(tokens) - 1], struct.pack(f"<{VOCAB}f", *[-1.0] * VOCAB))

        def batch(self, items):
            return kvconform.LogProbs(None, struct.pack(f"<{3 * VOCAB}f", *[-2.0] * 3 * VOCAB))

    (_, _), (ext, ebufs), (batch, bbufs), (bad, _) = exchange(
        Server(), LOAD, {"op": "extend", "seq": 0, "tokens": [4, 5]},
        {"op": "batch", "items": [{"seq": 0, "tokens": [1]}, {"seq": 1, "tokens": [2, 3]}]},
        {"op": "spec", "seq": 0, "tokens": [8], "n": 0})
    assert ext["rows"] == [1] and ext["buffers"][0]["name"] == "logprobs" and ext["buffers"][0]["shape"] == [1, VOCAB], ext
    assert struct.unpack("<3f", ebufs["logprobs"][2]) == (-1, -1, -1)
    assert "rows" not in batch and batch["buffers"][0]["shape"] == [3, VOCAB] and "logprobs" in bbufs, batch
    assert bad["status"] == "ok" and bad["rows"] == [0], bad


def test_a_wrong_declaration_is_refused_before_serving():
    class BadOps(Counting):
        operations = ("rollback", "evict")

    with pytest.raises(ValueError, match=r"BadOps.operations \['evict'\]: known are rollback, reload, sequences, fork"):
        serve(BadOps(), stdin=io.BytesIO(), stdout=io.BytesIO())
    with pytest.raises(TypeError, match="not an instance of a kvconform.Engine subclass"):
        serve(Counting, stdin=io.BytesIO(), stdout=io.BytesIO())


def test_mutants():
    assert [kvconform.mutated_window(4, m) for m in kvconform.MUTANTS] == [4, 5, 3, None] + [4] * 15
    with pytest.raises(ValueError, match=r"unknown mutant 'window\+2'"):
        kvconform.mutated_window(4, "window+2")
    cfg = types.SimpleNamespace(sliding_window=4, layer_types=["sliding_attention", "full_attention"], num_hidden_layers=2)
    assert kvconform.mutate_hf_config(cfg, "full_attention_on_sliding").layer_types == ["full_attention"] * 2 and cfg.sliding_window == 4
    cfg = types.SimpleNamespace(sliding_window=4)
    assert kvconform.mutate_hf_config(cfg, "window_off_by_one-1").sliding_window == 3
    assert kvconform.mutate_hf_config(cfg, "full_attention_on_sliding").sliding_window is None
    # The model mutants: what a config can say of the feature, else Unsupported.
    cfg = types.SimpleNamespace(sliding_window=4, layer_types=["full_attention", "sliding_attention"], num_hidden_layers=2)
    assert kvconform.mutate_hf_config(cfg, "layer_types_swapped").layer_types == ["sliding_attention", "full_attention"]
    assert kvconform.mutate_hf_config(cfg, "window_on_every_layer").layer_types == ["sliding_attention"] * 2
    cfg = types.SimpleNamespace(num_hidden_layers=2, no_rope_layers=[1, 0])
    assert kvconform.mutate_hf_config(cfg, "nope_inverted").no_rope_layers == [0, 1]
    cfg = types.SimpleNamespace(rope_parameters={"full_attention": {"partial_rotary_factor": 0.25}, "sliding_attention": {}})
    assert kvconform.mutate_hf_config(cfg, "rope_all_rotary").rope_parameters["full_attention"]["partial_rotary_factor"] == 1.0
    for mutant in ("sinks_dropped", "shared_kv_full", "nope_inverted", "rope_all_rotary", "window_on_every_layer"):
        with pytest.raises(kvconform.Unsupported):
            kvconform.mutate_hf_config(types.SimpleNamespace(num_hidden_layers=2, sliding_window=None), mutant)


def test_serve_engine_process_and_client(tmp_path):
    """`python -m kvconform serve-engine FILE` (the one Engine subclass of the file), driven by
    protocol.Client as kvconform drives it; a print at import goes to stderr, not into the frames."""
    adapter = tmp_path / "chatty_engine.py"
    adapter.write_text("print('Loading engine')\nimport kvconform\n" + textwrap.dedent('''
        class Chatty(kvconform.Engine):
            name = "chatty"
            def load(self, model_dir, options, mutant, max_tokens, sequences):
                print("loading", model_dir)
                return 2
            def extend(self, seq, tokens):
                return b"\\0" * 8 * len(tokens)
        '''))
    err = tmp_path / "stderr"
    with open(err, "w") as stderr:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        proc = subprocess.Popen([sys.executable, "-m", "kvconform", "serve-engine", str(adapter)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env)
        client = protocol.Client.__new__(protocol.Client)  # around an already started process
        client.process, client.command, client.hello = proc, "serve-engine", {}
        with client:
            assert client.request({"op": "hello", "protocol": 1, "level": "engine"})[0]["name"] == "chatty"
            assert client.request(LOAD)[0] == {"status": "ok", "vocab": 2}
            assert client.request({"op": "extend", "seq": 0, "tokens": [1]})[1]["logits"][1] == (1, 2)
            with pytest.raises(kvconform.Unsupported, match="reload is not supported"):
                client.request({"op": "reload", "seq": 0})
            with pytest.raises(protocol.WorkerError, match="does not implement reset"):
                client.request({"op": "reset"})
            assert client.request({"op": "reset"}, check=False)[0]["status"] == "error"
    assert proc.returncode == 0
    assert "Loading engine" in err.read_text() and "loading /m" in err.read_text()


def test_the_old_module_is_a_deprecated_shim():
    sys.path.insert(0, os.path.join(HERE, "..", "..", "engines"))
    try:
        sys.modules.pop("kvc_engine", None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import kvc_engine
        assert kvc_engine.Engine is kvconform.Engine and kvc_engine.serve is kvconform.serve_engine
        assert any(issubclass(w.category, DeprecationWarning) and "goes away in the next release" in str(w.message)
                   for w in caught), [str(w.message) for w in caught]
    finally:
        sys.path.pop(0)


def test_protocol_frames_are_the_documented_bytes():
    stream = io.BytesIO()
    protocol.send(stream, {"op": "x"}, [("out", "float32", (1,), b"\0\0\x80\x3f")])
    raw = stream.getvalue()
    n = struct.unpack("<I", raw[:4])[0]
    assert json.loads(raw[4:4 + n]) == {"op": "x", "buffers": [{"name": "out", "dtype": "float32", "shape": [1], "nbytes": 4}]}
    assert raw[4 + n:] == b"\0\0\x80\x3f"
    stream.seek(0)
    assert protocol.receive(stream) == ({"op": "x", "buffers": [{"name": "out", "dtype": "float32", "shape": [1], "nbytes": 4}]},
                                        {"out": ("float32", (1,), b"\0\0\x80\x3f")})
    with pytest.raises(protocol.Closed):
        protocol.receive(io.BytesIO(b"\x05\0\0\0{}"))


def test_cache_lock_makes_a_second_process_wait(tmp_path):
    """Two engine runs converting one checkpoint into one cache folder: the second waits for the
    first's block to end (it would otherwise see the folder half built, or remove it under the first)."""
    folder = str(tmp_path / "model-abc")
    waiter = [sys.executable, "-c", "import sys, kvconform\nwith kvconform.cache_lock(sys.argv[1]): print('got it')", folder]
    with kvconform.cache_lock(folder):
        p = subprocess.Popen(waiter, stdout=subprocess.PIPE, text=True)
        with pytest.raises(subprocess.TimeoutExpired):
            p.wait(timeout=1.0)
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 0 and out.strip() == "got it"


def test_native_writes_to_descriptor_1_go_to_stderr_not_into_the_frames(tmp_path):
    """A native library's output on file descriptor 1 (os.write(1), printf, a child process that
    inherits it) goes to stderr: the protocol's stream is a duplicate of descriptor 1, which points
    at stderr while the worker serves (mutant: protocol_stdout that only swaps sys.stdout)."""
    adapter = tmp_path / "native_engine.py"
    adapter.write_text("import os\nos.write(1, b'\\x1b[2mINFO native load\\x1b[0m\\n')\nimport kvconform\n" + textwrap.dedent('''
        import subprocess
        class Native(kvconform.Engine):
            name = "native"
            def load(self, model_dir, options, mutant, max_tokens, sequences):
                os.write(1, b"\\x1b[32m INFO\\x1b[0m weights loaded\\n")
                subprocess.run(["echo", "a child's stdout"], check=True)
                return 2
            def extend(self, seq, tokens):
                os.write(1, b"printf from the kernel\\n")
                return b"\\0" * 8 * len(tokens)
            def reset(self):
                pass
        '''))
    requests = io.BytesIO()
    for r in ({"op": "hello", "protocol": 1, "level": "engine"}, LOAD, {"op": "extend", "seq": 0, "tokens": [1, 2]},
              {"op": "reset"}):
        protocol.send(requests, r)
    err = tmp_path / "stderr"
    with open(err, "w") as stderr:  # all requests at once: a broken frame must fail, not hang
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        proc = subprocess.run([sys.executable, "-m", "kvconform", "serve-engine", str(adapter)], input=requests.getvalue(),
                              stdout=subprocess.PIPE, stderr=stderr, env=env, timeout=120)
    assert proc.returncode == 0
    out = io.BytesIO(proc.stdout)
    assert out.getvalue()[:4] != b"\x1b[2m", "the native library's text came first on the protocol's stream"
    (hello, _), (load, _), (ext, bufs), (reset, _) = [protocol.receive(out) for _ in range(4)]
    assert out.read() == b"", "bytes after the last reply"
    assert hello["name"] == "native" and load == {"status": "ok", "vocab": 2} and reset == {"status": "ok"}
    assert bufs["logits"][1] == (2, 2)
    text = err.read_text()
    for line in ("INFO native load", "weights loaded", "a child's stdout", "printf from the kernel"):
        assert line in text


class Prompted(kvconform.PromptEngine):
    """A prompt engine whose score of position i is the prompt's sum up to i in every column (logits)
    or as {id: score} rows (log-probabilities): the prompt the class keeps is visible in the numbers."""
    name = "prompted"

    def __init__(self, kind="logits", answers="every"):
        self.kind, self.answers = kind, answers
        self.asked = []

    def open(self, model_dir, options, mutant, max_tokens, sequences):
        return VOCAB

    def score(self, prompt, rows):
        self.asked.append((list(prompt), list(rows)))
        sums = [float(sum(prompt[: r + 1])) for r in rows]
        if self.kind == "logprobs":
            return [{t: s for t in range(VOCAB)} for s in sums]
        return struct.pack(f"<{len(rows) * VOCAB}f", *[s for s in sums for _ in range(VOCAB)])


def floats(bufs, name="logits"):
    data = bufs[name][2]
    return struct.unpack(f"<{len(data) // 4}f", data)[::VOCAB]


@pytest.mark.parametrize("mutant", ["none", "fork_off_by_one", "spec_rollback_off_by_one"])
def test_a_prompt_engine_does_each_operation_on_prompts(mutant):
    e = Prompted()
    load = dict(LOAD, mutant=mutant)
    steps = [load, {"op": "extend", "seq": 0, "tokens": [1, 2, 3]},
             {"op": "spec", "seq": 0, "tokens": [10, 20], "n": 1},    # [1, 2, 3, 10]
             {"op": "rollback", "seq": 0, "n": 2},                    # [1, 2]
             {"op": "fork", "seq": 1, "from": 0, "length": 1},        # seq 1: [1]
             {"op": "reload", "seq": 1},
             {"op": "batch", "items": [{"seq": 0, "tokens": [5]}, {"seq": 1, "tokens": [7, 1]}]},
             {"op": "reset"}, {"op": "extend", "seq": 1, "tokens": [4]}]
    replies = exchange(e, *steps)
    assert [r[0]["status"] for r in replies] == ["ok"] * len(steps)
    ext, spec, batch, after = floats(replies[1][1]), floats(replies[2][1]), floats(replies[6][1]), floats(replies[8][1])
    assert ext == (1, 3, 6) and after == (4,)
    if mutant == "none":
        assert spec == (16, 36) and batch == (8, 8, 9)
    elif mutant == "fork_off_by_one":  # the fork started empty, one token short: sequence 1 shows it
        assert batch == (8, 7, 8)
    else:  # the spec cycle dropped one token more: [1, 2, 3] -> rollback 2 -> [1]
        assert batch == (6, 8, 9)


@pytest.mark.parametrize("mutant", ["none", "preempt_short", "turn_past"])
def test_a_prompt_engine_preempts_and_turns_on_prompts(mutant):
    # preempt keeps the prompt (it is recomputed on every call); a turn cuts it back to `keep`, then
    # extends; each mutant shows in the next numbers.
    steps = [dict(LOAD, mutant=mutant), {"op": "extend", "seq": 0, "tokens": [1, 2, 3]},
             {"op": "preempt", "seq": 0},                               # [1, 2, 3]
             {"op": "extend", "seq": 0, "tokens": [4]},                 # [1, 2, 3, 4]
             {"op": "turn", "seq": 0, "keep": 1, "tokens": [10]},       # [1, 10]
             {"op": "extend", "seq": 0, "tokens": [4]}]                 # [1, 10, 4]
    replies = exchange(Prompted(), *steps)
    assert [r[0]["status"] for r in replies] == ["ok"] * len(steps)
    got = tuple(floats(replies[k][1])[0] for k in (3, 4, 5))
    assert got == {"none": (10, 11, 15), "preempt_short": (7, 11, 15), "turn_past": (10, 13, 17)}[mutant]


def test_a_prompt_engine_answers_the_last_row_and_assembles_log_probabilities():
    e = Prompted(kind="logprobs", answers="last")
    (load, _), (ext, bufs), (batch, bbufs) = exchange(
        e, LOAD, {"op": "extend", "seq": 0, "tokens": [1, 2, 3]},
        {"op": "batch", "items": [{"seq": 0, "tokens": [5]}, {"seq": 1, "tokens": [7, 1]}]})
    assert ext["rows"] == [2] and ext["buffers"][0]["name"] == "logprobs" and floats(bufs, "logprobs") == (6,)
    assert batch["rows"] == [0, 2] and floats(bbufs, "logprobs") == (11, 8)
    assert e.asked[0] == ([1, 2, 3], [2])


def test_a_prompt_engine_refuses_a_row_without_the_whole_vocabulary():
    class Short(Prompted):
        def score(self, prompt, rows):
            return [{0: 0.0, 1: -1.0} for _ in rows]  # top log-probabilities of 2 tokens, vocab 3
    (_, _), (ext, _) = exchange(Short(kind="logprobs"), LOAD, {"op": "extend", "seq": 0, "tokens": [1]})
    assert ext["status"] == "error" and "token 2 missing" in ext["error"] and "whole vocabulary" in ext["error"]


def test_a_prompt_engine_refuses_the_operation_mutants_it_cannot_do():
    (load, _), = exchange(Prompted(), dict(LOAD, mutant="fork_shared"))
    assert load["status"] == "unsupported" and "fork_shared" in load["error"]


def test_mutate_hf_config_on_config_json_without_transformers():
    """The mutants on config.json's dict, as an engine that converts the checkpoint needs them, with
    the rules of the PretrainedConfig path (mutant of the test: the dict returned unchanged)."""
    mistral = {"model_type": "mistral", "num_hidden_layers": 3, "sliding_window": 5, "vocab_size": 256}
    assert kvconform.mutate_hf_config(dict(mistral), "window_off_by_one+1")["sliding_window"] == 6
    assert kvconform.mutate_hf_config(dict(mistral), "window_off_by_one-1")["sliding_window"] == 4
    assert kvconform.mutate_hf_config(dict(mistral), "full_attention_on_sliding")["sliding_window"] is None
    assert kvconform.mutate_hf_config(dict(mistral), "fork_off_by_one") == mistral
    gemma = {"num_hidden_layers": 2, "sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]}
    cfg = dict(gemma)
    assert kvconform.mutate_hf_config(cfg, "full_attention_on_sliding") is cfg and cfg["layer_types"] == ["full_attention"] * 2
    assert kvconform.mutate_hf_config(dict(gemma), "layer_types_swapped")["layer_types"] == ["full_attention", "sliding_attention"]
    llama4 = {"num_hidden_layers": 4, "attention_chunk_size": 8, "sliding_window": None}
    assert kvconform.mutate_hf_config(dict(llama4), "window_off_by_one+1")["attention_chunk_size"] == 9
    with pytest.raises(kvconform.Unsupported):
        kvconform.mutate_hf_config(dict(mistral), "nope_inverted")
    json.dumps(kvconform.mutate_hf_config(dict(gemma), "window_on_every_layer"))  # still JSON
