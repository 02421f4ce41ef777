#!/usr/bin/python3
"""Writes tests/data/sentencepiece_reference.json: for each SentencePiece model in tests/data, the
ids the SentencePiece library's own Python module (Debian's python3-sentencepiece) gives for a set
of texts, and the text it decodes them back to. engine.tokenizers.sentencepiece checks the engine
against this file.

    /usr/bin/python3 scripts/sentencepiece_reference.py
"""
import json
import os

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data")

TEXTS = [
    "Once upon a time, there was a little girl named Lily.",
    "She liked to play outside in the sun. One day, she saw a big, red ball!",
    "  leading spaces, trailing spaces  ",
    "two\nlines\n\nand a blank one",
    "tabs\tand\tmore\ttabs",
    "Numbers: 3.14159, 2024, 1,000,000 and 007.",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber stra\u00dfe",
    "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3068\u4e2d\u6587\u53e5\u5b50",
    "emoji \U0001F600 \U0001F436\U0001F431 and \u2764\ufe0f",
    "\u0417\u0434\u0440\u0430\u0432\u0441\u0442\u0432\u0443\u0439, \u043c\u0438\u0440!",
    "a",
    " ",
    "",
    "\u2581already has the meta symbol",
    "x" * 300,
]


def stories():
    """The first 6 stories of the real TinyStories sample (one story per line)."""
    with open(os.path.join(DATA, "tinystories", "valid-sample.txt"), encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()][:6]


def main():
    texts = TEXTS + stories()
    out = {"generator": "scripts/sentencepiece_reference.py", "sentencepiece_version": spm.__version__, "models": {}}
    for name in ("stories260K", "llama2-tokenizer"):
        sp = spm.SentencePieceProcessor(model_file=os.path.join(DATA, name, "tokenizer.model"))
        cases = []
        for text in texts:
            ids = sp.encode(text)
            cases.append({"text": text, "ids": ids, "decoded": sp.decode(ids)})
        out["models"][name] = {"pieces": sp.get_piece_size(), "bos": sp.bos_id(), "eos": sp.eos_id(),
                               "unk": sp.unk_id(), "cases": cases}
    path = os.path.join(DATA, "sentencepiece_reference.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path}: {len(texts)} texts x {len(out['models'])} models")


if __name__ == "__main__":
    main()
