"""Checks the tokenizer every model of make_models.py ships, as the engines load it: with the
`tokenizers` library (tokenizer.json) and with transformers' AutoTokenizer (what CTranslate2's
converter and onnxruntime-genai's builder call), on the zoo, the families set and drawn models.
For each: the vocabulary is exactly the config's vocab_size (no added token grows it) and maps "<i>"
to i, bos and eos are set (ids 1 and 2), and a prompt of ids written as text encodes back to the same
ids with nothing added around it (`tokenizers`). Run it with an environment that has transformers (an engine venv):

    $(bash engines/setup_env.sh ctranslate2) engines/models/check_tokenizer.py [--mutant NAME]

--mutant damages the written files the way the loaders broke before (null-bos: a null bos_token;
added-token: a 257th token added; short-vocab: one id missing; bos-added: a post-processor that adds
bos to every prompt), and the check must FAIL. Exit 0 when all hold, 1 with the reasons."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MUTANTS = ("null-bos", "added-token", "short-vocab", "bos-added")


def mutate(d, mutant):
    with open(os.path.join(d, "tokenizer.json")) as f:
        tok = json.load(f)
    with open(os.path.join(d, "tokenizer_config.json")) as f:
        conf = json.load(f)
    if mutant == "null-bos":
        conf["bos_token"] = None
    elif mutant == "added-token":
        n = len(tok["model"]["vocab"])
        tok["added_tokens"].append({"id": n, "content": "<|extra|>", "single_word": False, "lstrip": False,
                                    "rstrip": False, "normalized": False, "special": True})
    elif mutant == "short-vocab":
        tok["model"]["vocab"].pop(max(tok["model"]["vocab"], key=tok["model"]["vocab"].get))
    elif mutant == "bos-added":
        tok["post_processor"] = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<1>", "type_id": 0}},
                                 {"Sequence": {"id": "A", "type_id": 0}}], "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
                                 "special_tokens": {"<1>": {"id": "<1>", "ids": [1], "tokens": ["<1>"]}}}
    for name, content in (("tokenizer.json", tok), ("tokenizer_config.json", conf)):
        with open(os.path.join(d, name), "w") as f:
            json.dump(content, f)


def check(d):
    """The problems of the model folder d's tokenizer (an empty list when it is right)."""
    import tokenizers
    import transformers

    with open(os.path.join(d, "config.json")) as f:
        vocab = int(json.load(f)["vocab_size"])
    problems = []
    ids = [(i * 37 + 5) % vocab for i in range(40)] + [0, 1, 2, vocab - 1]
    text = " ".join(f"<{i}>" for i in ids)
    try:
        tok = tokenizers.Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        if tok.get_vocab_size(with_added_tokens=True) != vocab:
            problems.append(f"tokenizers: vocabulary of {tok.get_vocab_size(with_added_tokens=True)}, the config's vocab_size is {vocab}")
        got = tok.encode(text).ids
        if got != ids:
            problems.append(f"tokenizers: the prompt encodes to {got[:6]}... not {ids[:6]}...")
    except Exception as e:  # a file the library refuses is the finding
        problems.append(f"tokenizers: {type(e).__name__}: {e}")
    try:
        auto = transformers.AutoTokenizer.from_pretrained(d)
        if len(auto) != vocab:
            problems.append(f"AutoTokenizer: len {len(auto)}, the config's vocab_size is {vocab}")
        if (auto.bos_token_id, auto.eos_token_id) != (1, 2):
            problems.append(f"AutoTokenizer: bos/eos ids {auto.bos_token_id}/{auto.eos_token_id}, expected 1/2")
        # The tokens by text, as CTranslate2's converter reads the vocabulary (get_vocab) and is fed
        # tokens: transformers 5.24 loads a qwen2 checkpoint's tokenizer as Qwen2Tokenizer, whose
        # byte-level pre-tokenizer drops these words from a text prompt, but its vocabulary is ours.
        got = auto.convert_tokens_to_ids(text.split())
        if got != ids or auto.get_vocab() != {f"<{i}>": i for i in range(vocab)}:
            problems.append(f"AutoTokenizer: the prompt's tokens are ids {got[:6]}... not {ids[:6]}..., or its vocabulary differs")
    except Exception as e:
        problems.append(f"AutoTokenizer: {type(e).__name__}: {e}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mutant", choices=MUTANTS + ("all",),
                    help="damage the files this way; all: each mutant in turn, every one must FAIL (one process: the imports once)")
    args = ap.parse_args()
    if args.mutant == "all":
        missed = []
        for mutant in MUTANTS:
            args.mutant = mutant
            if run(args) == 0:
                missed.append(mutant)
        print(f"FAIL: mutants not caught: {', '.join(missed)}" if missed else f"OK: every mutant caught ({', '.join(MUTANTS)})")
        return 1 if missed else 0
    return run(args)


def run(args):
    with tempfile.TemporaryDirectory() as out:
        make = [sys.executable, os.path.join(HERE, "make_models.py"), out]
        # The zoo, a family whose registered tokenizer class is its own (qwen2), one with another
        # layout (cohere2) and a drawn model; a mutant needs only one model to show.
        sets = ([["--only", "gemma2-w4"]] if args.mutant else
                [[], ["--set", "families", "--only", "qwen2-nosw", "--only", "cohere2-w3"], ["--set", "drawn", "--only", "draw-qwen2-0-0"]])
        for extra in sets:
            subprocess.run(make + extra, check=True, stdout=subprocess.DEVNULL)
        problems = []
        names = sorted(os.listdir(out))
        for name in names:
            d = os.path.join(out, name)
            if not os.path.isfile(os.path.join(d, "config.json")):
                continue
            if args.mutant:
                mutate(d, args.mutant)
            problems += [f"{name}: {p}" for p in check(d)]
        if problems:
            print("FAIL: " + "\n  ".join(problems[:12]) + (f"\n  ... {len(problems) - 12} more" if len(problems) > 12 else ""))
            return 1
        print(f"OK: {len(names)} models' tokenizers load in tokenizers and AutoTokenizer, vocab_size tokens, bos/eos 1/2, ids round-trip")
        return 0


if __name__ == "__main__":
    sys.exit(main())
