#!/usr/bin/env python3
"""Text to a pipetrain token file with a model's Hugging Face tokenizer.

  scripts/tokenize.py TEXT... --tokenizer DIR --out FILE [--format u16|u32]

Each TEXT file is one document: its ids (no special tokens added), then the tokenizer's EOS id,
in the order given. FILE holds little-endian uint16 (format u16) or uint32 (u32) ids; without
--format, u16 when the vocabulary fits in 16 bits, else u32. Point the spec at it:
  data: {path: FILE, format: u16}
DIR is a local tokenizer directory (tokenizer.json / tokenizer_config.json, e.g. the model
directory pipe_convert --from-hf read); nothing is downloaded. Needs transformers.
"""
import os
import sys

# This file's name shadows the standard library's tokenize module, which transformers imports
# (through inspect): keep this directory off the import path.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

import argparse  # noqa: E402
import array  # noqa: E402


def fail(msg):
    print(f"tokenize.py: {msg}", file=sys.stderr)
    sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description="Text files to a pipetrain token file (u16/u32).")
    ap.add_argument("text", nargs="+", help="text files, one document each (UTF-8)")
    ap.add_argument("--tokenizer", required=True, help="local Hugging Face tokenizer directory")
    ap.add_argument("--out", required=True, help="the token file to write")
    ap.add_argument("--format", choices=["u16", "u32"], help="default: by vocabulary size")
    a = ap.parse_args()
    try:
        from transformers import AutoTokenizer
    except ImportError:
        fail("needs transformers (scripts/install-python.sh installs it)")
    if not os.path.isdir(a.tokenizer):
        fail(f"{a.tokenizer}: not a directory; give a local tokenizer directory")
    try:
        tok = AutoTokenizer.from_pretrained(a.tokenizer, local_files_only=True)
    except (OSError, ValueError) as exc:
        fail(f"{a.tokenizer}: cannot load a tokenizer: {str(exc).splitlines()[0]}")
    if tok.eos_token_id is None:
        fail(f"{a.tokenizer}: the tokenizer has no EOS token to separate documents with")
    vocab = len(tok)
    fmt = a.format or ("u16" if vocab <= 1 << 16 else "u32")
    limit = 1 << (16 if fmt == "u16" else 32)
    ids = array.array("H" if fmt == "u16" else "I")
    if ids.itemsize != (2 if fmt == "u16" else 4):
        fail("this platform's array sizes do not match u16/u32")
    for path in a.text:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"{path}: cannot read as UTF-8 text: {exc}")
        doc = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        big = max(doc)
        if big >= limit:
            fail(f"{path}: token id {big} does not fit in {fmt}; use --format u32")
        ids.extend(doc)
    if sys.byteorder != "little":
        ids.byteswap()
    tmp = f"{a.out}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            ids.tofile(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, a.out)
    except OSError as exc:
        if os.path.exists(tmp):
            os.remove(tmp)
        fail(f"{a.out}: cannot write: {exc}")
    print(f"tokenize.py: wrote {a.out}: {len(ids)} tokens from {len(a.text)} document(s), "
          f"format {fmt} (vocab {vocab}); in the spec: data: {{path: {a.out}, format: {fmt}}}, "
          f"model.vocab >= {vocab}")


if __name__ == "__main__":
    main()
