#!/usr/bin/env python3
"""Turn the public hash vectors (JSON) into a C header for the cmocka tests.

The expected hashes come from the vectors file (an independent implementation), never from
libkvreg itself. u64 values are read from the exact decimal *_str fields.
"""
import json
import sys


def main(src, dst):
    with open(src) as f:
        doc = json.load(f)
    out = ["/* Generated from %s by gen_vectors_h.py; do not edit. */" % src.split("/")[-1],
           "#include <stdint.h>", "#include <stddef.h>", ""]
    names = []
    for ci, case in enumerate(doc["cases"]):
        toks = case["tokens"]
        out.append("static const uint32_t vec%d_tokens[] = {%s};" % (ci, ", ".join(
            "%uu" % t for t in toks) if toks else "0"))
        blocks = case["blocks"]
        rows = []
        for b in blocks:
            parent = b["parent_sequence_hash_str"]
            rows.append("{UINT64_C(%s), UINT64_C(%s), UINT64_C(%s), %d}" % (
                b["block_hash_str"], b["sequence_hash_str"], parent if parent else "0",
                1 if parent else 0))
        out.append("static const struct vec_block vec%d_blocks[] = {%s};" % (
            ci, ", ".join(rows) if rows else "{0, 0, 0, 0}"))
        names.append("{%s, vec%d_tokens, %d, %d, UINT64_C(%s), vec%d_blocks, %d, %d}" % (
            json.dumps(case["note"]), ci, len(toks), case["block_size"], case["salt_str"], ci,
            len(blocks), len(case["partial_tokens"])))
    out.append("")
    out.append("static const struct vec_case vec_cases[] = {")
    out.extend("    %s," % n for n in names)
    out.append("};")
    out.append("#define VEC_N_CASES %d" % len(names))
    with open(dst, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
