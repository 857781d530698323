"""Shared test helpers: the public vectors and small registry fixtures."""

import json
import os
import pathlib
import unittest

_REPO = pathlib.Path(__file__).resolve().parents[3]


def load_vectors():
    """tests/vectors/public.json (KVREG_VECTORS overrides). u64 values are taken from the
    *_str fields: they are exact whatever JSON parser wrote the file."""
    path = pathlib.Path(os.environ.get("KVREG_VECTORS") or _REPO / "tests/vectors/public.json")
    if not path.is_file():
        raise unittest.SkipTest("vectors file %s not found" % path)
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    cases = []
    for case in data["cases"]:
        blocks = []
        for b in case["blocks"]:
            parent = b["parent_sequence_hash_str"]
            blocks.append({
                "tokens": b["tokens"],
                "block_hash": int(b["block_hash_str"]),
                "sequence_hash": int(b["sequence_hash_str"]),
                "parent_sequence_hash": None if parent is None else int(parent),
            })
        cases.append({
            "note": case["note"],
            "tokens": case["tokens"],
            "block_size": case["block_size"],
            "salt": int(case["salt_str"]),
            "blocks": blocks,
            "partial_tokens": case["partial_tokens"],
        })
    return cases


def infos(n, salt=0, block_size=4, start=0):
    """n chained BlockInfo for distinct tokens, with the tokens of each block."""
    import kvreg
    tokens = list(range(start, start + n * block_size))
    blocks = kvreg.hash_blocks(tokens, block_size, salt)
    return [(b, tokens[i * block_size:(i + 1) * block_size]) for i, b in enumerate(blocks)]
