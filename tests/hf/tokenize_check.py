#!/usr/bin/env python3
"""tokenize_check.py TOKENIZE_PY: scripts/tokenize.py's file holds exactly the tokenizer's own
encoding of each document followed by EOS, as u16 (chosen for a small vocabulary) and u32
(chosen for a vocabulary over 65536). The tokenizers are made here (a WordLevel vocabulary),
nothing is downloaded. Exit 77 (skipped) without transformers/tokenizers."""
import array
import os
import shutil
import subprocess
import sys
import tempfile

try:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
except ImportError as exc:
    print(f"SKIP: {exc.name} is not importable by {sys.executable} (scripts/install-python.sh)")
    sys.exit(77)

TOKENIZE = sys.argv[1]
DOCS = ["the quick brown fox jumps over the lazy dog\n", "a lazy dog sleeps\nthe fox runs away"]
failures = []


def make_tokenizer(d, extra):
    words = sorted({w for doc in DOCS for w in doc.split()})
    vocab = {"[UNK]": 0, "[EOS]": 1}
    for i in range(extra):
        vocab[f"filler{i}"] = len(vocab)
    for w in words:  # the real words last: above 65535 when extra is large
        vocab[w] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="[EOS]")
    fast.save_pretrained(d)
    return fast


def check(work, name, extra, fmt_arg, want_fmt):
    d = os.path.join(work, name)
    tok = make_tokenizer(d, extra)
    texts = []
    for i, doc in enumerate(DOCS):
        p = os.path.join(work, f"doc{i}.txt")
        with open(p, "w") as f:
            f.write(doc)
        texts.append(p)
    out = os.path.join(work, f"{name}.bin")
    cmd = [sys.executable, TOKENIZE, *texts, "--tokenizer", d, "--out", out] + fmt_arg
    r = subprocess.run(cmd, capture_output=True, text=True)
    ok = r.returncode == 0 and f"format {want_fmt}" in r.stdout
    want = []
    for doc in DOCS:
        want += tok(doc, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    got = array.array("H" if want_fmt == "u16" else "I")
    if ok:
        with open(out, "rb") as f:
            got.frombytes(f.read())
        if sys.byteorder != "little":
            got.byteswap()
    ok = ok and list(got) == want and max(want) > 1
    print(("ok    " if ok else "FAIL  ") + f"{name}: {want_fmt}, {len(want)} ids "
          f"(max {max(want)}) {r.stdout.strip()} {r.stderr.strip()}")
    if not ok:
        failures.append(name)


def main():
    work = tempfile.mkdtemp(prefix="tokenize_")
    try:
        check(work, "small", 0, [], "u16")
        check(work, "large", 70000, [], "u32")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        sys.exit(1)
    print("tokenize: files equal the tokenizer's own encoding")


main()
