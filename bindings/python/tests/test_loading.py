"""Library loading: KVREG_LIBRARY wins, a bad path is a clear ImportError."""

import os
import re
import subprocess
import sys
import types
import unittest
from unittest import mock

import kvreg
from kvreg import _ffi

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(kvreg.__file__)))


def _import_with(env_library):
    env = dict(os.environ, PYTHONPATH=_PKG_DIR)
    if env_library is None:
        env.pop("KVREG_LIBRARY", None)
    else:
        env["KVREG_LIBRARY"] = env_library
    return subprocess.run([sys.executable, "-c", "import kvreg; print(kvreg.version())"],
                          env=env, capture_output=True, text=True, timeout=60)


class Loading(unittest.TestCase):
    def test_version_matches_abi(self):
        self.assertEqual(kvreg.version_number() // 10000, _ffi.ABI_MAJOR)
        major, minor, patch = (int(x) for x in kvreg.version().split(".")[:3])
        self.assertEqual(kvreg.version_number(), major * 10000 + minor * 100 + patch)

    def test_bad_path_is_import_error(self):
        res = _import_with("/nonexistent/libkvreg.so.0")
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("ImportError", res.stderr)
        self.assertIn("KVREG_LIBRARY", res.stderr)

    def test_explicit_path_is_used(self):
        path = os.environ.get("KVREG_LIBRARY")
        if not path:
            self.skipTest("KVREG_LIBRARY not set: loaded from the system")
        res = _import_with(path)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(res.stdout.strip(), kvreg.version())

    def test_every_header_function_has_a_prototype(self):
        header = os.path.join(_PKG_DIR, "..", "..", "include", "kvreg.h")
        if not os.path.isfile(header):
            self.skipTest("include/kvreg.h not found next to the binding")
        with open(header, encoding="utf-8") as f:
            text = f.read()
        declared = set(re.findall(r"KVREG_API[^;{]*?\b(kvreg_\w+)\s*\(", text))
        self.assertGreater(len(declared), 40)
        self.assertEqual(declared, set(_ffi._PROTOTYPES))
        for name in declared:
            self.assertIsNotNone(getattr(_ffi.lib, name).argtypes, name)


class _FakeLib:
    """Stands in for a CDLL of another major version / an older build."""
    _name = "libkvreg.so.1"

    def kvreg_version_number(self):
        return 10203

    def kvreg_version_string(self):
        return b"1.2.3"


class Refusals(unittest.TestCase):
    def test_other_major_is_refused(self):
        with mock.patch.object(_ffi, "lib", _FakeLib()):
            with self.assertRaisesRegex(ImportError, "major 1.*needs major 0"):
                _ffi._check_version()

    def test_missing_symbols_are_named(self):
        with self.assertRaisesRegex(ImportError, "kvreg_register_batch"):
            _ffi._bind(types.SimpleNamespace(_name="libkvreg.so.0"))
