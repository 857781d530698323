"""vLLM's field rules for a KVEventBatch, checked on what an independent decoder (Debian's
python3-msgpack) makes of our encoder's bytes. The rules live in one place, the repo's
tests/wire/check_vllm_rules.py; this module loads it by path (KVREG_VLLM_RULES names it when
the tests run from a copy outside the source tree) and adds the entry point the
binding's tests use when `import msgpack` fails in-process: run this file under Debian's own
interpreter (/usr/bin/python3, where python3-msgpack installs) with hex payloads as arguments;
it prints a JSON list of {"ok": summary} or {"violation": text}.
"""

import importlib.util
import json
import os
import sys

_CHECKER = os.environ.get("KVREG_VLLM_RULES") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, os.pardir, "tests", "wire",
    "check_vllm_rules.py")
if not os.path.isfile(_CHECKER):
    raise ImportError("vLLM rule checker not found at %s (set KVREG_VLLM_RULES to the source "
                      "tree's tests/wire/check_vllm_rules.py)" % _CHECKER)
_spec = importlib.util.spec_from_file_location("kvreg_check_vllm_rules", _CHECKER)
_rules = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_rules)

Violation = _rules.Violation


def check_batch(batch):
    """Raise Violation on the first broken rule; return {"ts", "dp_rank", "events": [...]}."""
    return _rules.check_batch(batch)


def main(argv):
    import msgpack  # Debian python3-msgpack: the independent decoder
    results = []
    for hexed in argv:
        batch = msgpack.unpackb(bytes.fromhex(hexed), raw=False, strict_map_key=True)
        try:
            results.append({"ok": _rules.check_batch(batch)})
        except Violation as v:
            results.append({"violation": str(v)})
    # Hashes go up to 2**64: JSON ints stay exact through Python's json module.
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
