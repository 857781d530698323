"""Library loading: KVREG_LIBRARY wins, a bad path is a clear ImportError."""

import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile
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

    def test_package_version_is_the_library_release(self):
        # _version.py follows the project version in meson.build, which the library reports.
        self.assertEqual(kvreg.__version__, kvreg.version())

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
            text = _strip_deprecated(f.read())
        declared = set(re.findall(r"KVREG_API[^;{]*?\b(kvreg_\w+)\s*\(", text))
        self.assertGreater(len(declared), 40)
        self.assertEqual(declared, set(_ffi._PROTOTYPES))
        for name in declared:
            self.assertIsNotNone(getattr(_ffi.lib, name).argtypes, name)


    def test_prototypes_match_header_types(self):
        # Names alone would not catch a changed signature (API 0.2 gave the *_contains
        # functions a third parameter): compare every return and parameter type.
        header = os.path.join(_PKG_DIR, "..", "..", "include", "kvreg.h")
        if not os.path.isfile(header):
            self.skipTest("include/kvreg.h not found next to the binding")
        with open(header, encoding="utf-8") as f:
            text = _strip_deprecated(re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S))
        decls = re.findall(r"KVREG_API\s+([^;{(]*?)\b(kvreg_\w+)\s*\(([^)]*)\)", text)
        self.assertEqual({name for _, name, _ in decls}, set(_ffi._PROTOTYPES))
        for ret, name, params in decls:
            with self.subTest(name):
                restype, argtypes, _ = _ffi._PROTOTYPES[name]
                self.assertIs(_ctype(ret), restype, "return type %r" % ret)
                params = [p for p in params.split(",") if p.strip() not in ("", "void")]
                self.assertEqual(len(params), len(argtypes), "parameters %r" % params)
                for p, t in zip(params, argtypes):
                    # drop the parameter name: the last identifier, unless it is the type
                    ctype = re.sub(r"\b\w+\s*$", "", p) if re.search(r"[*\s]\w+\s*$", p) else p
                    self.assertIs(_ctype(ctype), t, "parameter %r" % p)


def _strip_deprecated(text):
    """KVREG_DEPRECATED("...") marks a 0.x alias; the declaration is the rest."""
    return re.sub(r'KVREG_DEPRECATED\("[^"]*"\)\s*', "", text)


_SCALARS = {
    "void": None, "int": ctypes.c_int, "unsigned": ctypes.c_uint, "uint32_t": ctypes.c_uint32,
    "uint64_t": ctypes.c_uint64, "size_t": ctypes.c_size_t, "kvreg_block": ctypes.c_uint64,
    "kvreg_event_fn": _ffi.EVENT_FN, "kvreg_destroy_fn": _ffi.DESTROY_FN,
}


def _ctype(decl):
    """The ctypes type the binding must use for a C type spelled in the header."""
    decl = re.sub(r"\b(const|struct)\b", " ", decl).strip()
    stars = decl.count("*")
    base = decl.replace("*", "").strip()
    if stars == 1 and base == "char":
        return ctypes.c_char_p
    if stars == 1 and base == "void":
        return ctypes.c_void_p
    t = _SCALARS.get(base)
    if t is None and stars:
        t = getattr(_ffi, base)  # the opaque and record structs have their C names
    for _ in range(stars):
        t = ctypes.POINTER(t)
    return t


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


def _import_env(**changes):
    """The environment of a child that imports the package from this tree with no
    LD_LIBRARY_PATH, no KVREG_LIBRARY and no PKG_CONFIG_PATH unless given."""
    env = dict(os.environ, PYTHONPATH=_PKG_DIR)
    for name in ("KVREG_LIBRARY", "LD_LIBRARY_PATH", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR"):
        env.pop(name, None)
    env.update(changes)
    return env


def _loaded_from(env):
    return subprocess.run([sys.executable, "-c", "import kvreg; print(kvreg._ffi.lib._name)"],
                          env=env, capture_output=True, text=True, timeout=60)


class LoaderOrder(unittest.TestCase):
    """KVREG_LIBRARY takes a file or a directory; without it, pkg-config's libdir, then the
    loader's default path; the error lists every try."""

    def setUp(self):
        lib = os.environ.get("KVREG_LIBRARY")
        if not lib or not os.path.isfile(lib):
            self.skipTest("KVREG_LIBRARY does not name the build's library file")
        self.libdir = os.path.dirname(os.path.abspath(lib))
        self.soname = os.path.join(self.libdir, "libkvreg.so.0")
        if not os.path.exists(self.soname):
            self.skipTest("no libkvreg.so.0 beside KVREG_LIBRARY")

    def test_directory(self):
        res = _loaded_from(_import_env(KVREG_LIBRARY=self.libdir))
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(res.stdout.strip(), self.soname)

    def test_directory_without_library_lists_the_try(self):
        with tempfile.TemporaryDirectory() as empty:
            res = _loaded_from(_import_env(KVREG_LIBRARY=empty))
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("ImportError", res.stderr)
        self.assertIn("KVREG_LIBRARY=" + empty, res.stderr)
        self.assertIn(os.path.join(empty, "libkvreg.so.0"), res.stderr)

    def test_pkg_config_libdir(self):
        if shutil.which("pkg-config") is None:
            self.skipTest("pkg-config not installed")
        with tempfile.TemporaryDirectory() as pcdir:
            with open(os.path.join(pcdir, "kvreg.pc"), "w", encoding="utf-8") as f:
                f.write("libdir=%s\nName: kvreg\nDescription: test\nVersion: 0.4.0\n"
                        "Libs: -L${libdir} -lkvreg\n" % self.libdir)
            res = _loaded_from(_import_env(PKG_CONFIG_PATH=pcdir))
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(res.stdout.strip(), self.soname)

    def test_error_lists_every_try(self):
        def refuse(path):
            raise OSError("refused %s" % path)

        with mock.patch("ctypes.util.find_library", return_value=None), \
                mock.patch.object(_ffi, "_installed_libdir", return_value=None):
            with self.assertRaises(ImportError) as cm:
                _ffi._load(env={}, cdll=refuse, pkg_config=lambda env: "/pc/libdir")
            msg = str(cm.exception)
            self.assertIn("pkg-config --variable=libdir kvreg: /pc/libdir/libkvreg.so.0 "
                          "(refused /pc/libdir/libkvreg.so.0)", msg)
            self.assertIn("the dynamic loader's default path: libkvreg.so.0 (refused "
                          "libkvreg.so.0)", msg)
            with self.assertRaises(ImportError) as cm:
                _ffi._load(env={}, cdll=refuse, pkg_config=lambda env: None)
            self.assertIn("pkg-config --variable=libdir kvreg: no answer", str(cm.exception))
            self.assertIn("default path: libkvreg.so.0", str(cm.exception))

    def test_explicit_setting_is_the_only_try(self):
        calls = []

        def refuse(path):
            calls.append(path)
            raise OSError("refused")

        with self.assertRaises(ImportError) as cm:
            _ffi._load(env={"KVREG_LIBRARY": "/x/libkvreg.so.0"}, cdll=refuse,
                       pkg_config=lambda env: "/pc/libdir")
        self.assertEqual(calls, ["/x/libkvreg.so.0"])
        self.assertIn("KVREG_LIBRARY=/x/libkvreg.so.0", str(cm.exception))
