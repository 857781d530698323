"""Raw ctypes layer: loads libkvreg and mirrors include/kvreg.h one to one.

Nothing here owns memory or hides a status code except that `errcheck` turns a negative
status into a KvregError. The Pythonic layer (registry.py, pool.py, ...) builds on `lib`.
"""

import ctypes
import ctypes.util
import os

from . import errors

# The binding speaks the 0.x ABI (SONAME libkvreg.so.0). A different major means a different
# ABI, so refuse to load rather than call functions whose signatures may have changed.
ABI_MAJOR = 0
_SONAME = "libkvreg.so.0"

# ---- constants (values are stable in the header; new ones are only added) ----------------
OK = 0
EINVAL, ENOMEM, ERANGE, ESTATE, EEXIST, ENOENT, ESTALE, EBUSY, EOVERFLOW = range(-1, -10, -1)
ENOTSUP = -10  # the feature was not built into the loaded library (see features())
EPROTO = -11   # malformed input from outside (a wire payload that does not decode)

FEATURE_WIRE = 1
FEATURE_ZMQ = 2

ROUTER_SALT = 1337
POSITION_UNKNOWN = 0xFFFFFFFF
BLOCK_NONE = 0
# Pool ids are 1 .. KVREG_MAX_POOLS. The library raises its limit from 255 to 65535 (the
# event's pool_id field is 32 bits wide); nothing in this binding depends on the value: the
# library answers KVREG_EOVERFLOW (Overflow) when a registry has no free pool id left.
MAX_POOLS = 65535

EVENT_REGISTER = 1
EVENT_REMOVE = 2
EVENT_CLEARED = 3
EVENT_ID_SNAPSHOT = (1 << 64) - 1

MEDIUM_GPU = 0
MEDIUM_CPU = 1
MEDIUM_STORAGE = 2
MEDIUM_EXTERNAL = 3
MEDIUM_COUNT = 4

OPT_DELIVERY = 1
DELIVERY_INLINE = 0
DELIVERY_POLL = 1
OPT_KEEP_TOKENS = 2
OPT_POLL_CAPACITY = 3
OPT_SHARDS = 4
OPT_RESERVE_BLOCKS = 5
OPT_EVENT_MODE = 6
EVENTS_GLOBAL = 0
EVENTS_PER_TIER = 1

STAT_HASHES = 1
STAT_POOLS = 2
STAT_EVENTS_REGISTER = 3
STAT_EVENTS_REMOVE = 4
STAT_EVENTS_DROPPED = 5
STAT_EVENTS_QUEUED = 6
STAT_NEXT_EVENT_ID = 7
STAT_TOKEN_BYTES = 8
STAT_EVENTS_CLEARED = 9

U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1
INT_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_int) - 1)) - 1

# ---- types ---------------------------------------------------------------------------------
c_u32 = ctypes.c_uint32
c_u64 = ctypes.c_uint64
c_size = ctypes.c_size_t
c_int = ctypes.c_int
u32_p = ctypes.POINTER(c_u32)
u64_p = ctypes.POINTER(c_u64)
size_p = ctypes.POINTER(c_size)
int_p = ctypes.POINTER(c_int)


class kvreg_block_info(ctypes.Structure):
    _fields_ = [
        ("block_hash", c_u64),
        ("sequence_hash", c_u64),
        ("parent_sequence_hash", c_u64),
        ("has_parent", c_u32),
        ("position", c_u32),
    ]


class kvreg_event(ctypes.Structure):
    _fields_ = [
        ("kind", c_u32),
        ("pool_id", c_u32),
        ("event_id", c_u64),
        ("sequence_hash", c_u64),
        ("block_hash", c_u64),
        ("parent_sequence_hash", c_u64),
        ("has_parent", c_u32),
        ("n_tokens", c_u32),
        ("tokens", u32_p),
        ("medium", c_u32),
        ("reserved32", c_u32),
        ("reserved", c_u64 * 3),
    ]


class kvreg_block_desc(ctypes.Structure):
    _fields_ = [
        ("sequence_hash", c_u64),
        ("block_hash", c_u64),
        ("parent_sequence_hash", c_u64),
        ("has_parent", c_u32),
        ("block_size", c_u32),
        ("tokens", u32_p),
        ("n_tokens", c_size),
    ]


class kvreg_pool_block_desc(ctypes.Structure):
    """kvreg_block_desc with its size first (0.6): set size to ctypes.sizeof(...)."""
    _fields_ = [("size", c_size)] + kvreg_block_desc._fields_


# The header promises a fixed event stride (88 bytes on LP64); a mismatch here would make
# every poll read garbage, so fail at import time instead.
if ctypes.sizeof(ctypes.c_void_p) == 8:
    assert ctypes.sizeof(kvreg_event) == 88, ctypes.sizeof(kvreg_event)
    assert ctypes.sizeof(kvreg_block_info) == 32
    assert ctypes.sizeof(kvreg_block_desc) == 48


# Opaque objects: distinct pointer types so a Pool pointer cannot be passed as a Registry.
class kvreg_sequence(ctypes.Structure):
    pass


class kvreg_config(ctypes.Structure):
    pass


class kvreg_registry(ctypes.Structure):
    pass


class kvreg_pool(ctypes.Structure):
    pass


class kvreg_snapshot(ctypes.Structure):
    pass


seq_p = ctypes.POINTER(kvreg_sequence)
cfg_p = ctypes.POINTER(kvreg_config)
reg_p = ctypes.POINTER(kvreg_registry)
pool_p = ctypes.POINTER(kvreg_pool)
snap_p = ctypes.POINTER(kvreg_snapshot)
info_p = ctypes.POINTER(kvreg_block_info)
event_p = ctypes.POINTER(kvreg_event)
desc_p = ctypes.POINTER(kvreg_block_desc)
pdesc_p = ctypes.POINTER(kvreg_pool_block_desc)
kvreg_block = c_u64
block_p = ctypes.POINTER(kvreg_block)

# void (*)(const kvreg_event *, size_t, void *)  and  void (*)(void *)
EVENT_FN = ctypes.CFUNCTYPE(None, event_p, c_size, ctypes.c_void_p)
DESTROY_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


# ---- loading -------------------------------------------------------------------------------
def _installed_libdir():
    """The libdir of the `meson install` that installed this package (kvreg/_config.py is
    generated then); None for a source tree or a pip install."""
    try:
        from . import _config
    except ImportError:
        return None
    return getattr(_config, "LIBDIR", None)


def _pkg_config_libdir(env):
    """`pkg-config --variable=libdir kvreg`, or None (no pkg-config, no kvreg.pc)."""
    import subprocess
    try:
        out = subprocess.run(["pkg-config", "--variable=libdir", "kvreg"], env=env,
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    libdir = out.stdout.strip()
    return libdir if out.returncode == 0 and libdir else None


def _in_dir(path):
    """KVREG_LIBRARY names the library file or the directory holding it."""
    return os.path.join(path, _SONAME) if os.path.isdir(path) else path


def _load(env=None, cdll=None, pkg_config=None):
    """KVREG_LIBRARY (a file, or a directory holding libkvreg.so.0) wins, and only it is tried
    when set; else the libdir of the `meson install` that installed this package (a private
    prefix needs no LD_LIBRARY_PATH); then `pkg-config --variable=libdir kvreg`; then the
    dynamic loader's own search (the SONAME), then find_library. The ImportError lists every
    try and why it failed. (Parameters: for the tests only.)"""
    env = os.environ if env is None else env
    cdll = ctypes.CDLL if cdll is None else cdll
    pkg_config = _pkg_config_libdir if pkg_config is None else pkg_config
    tried = []

    def attempt(label, path):
        try:
            return cdll(path)
        except OSError as e:
            tried.append("%s: %s (%s)" % (label, path, e))
            return None

    explicit = env.get("KVREG_LIBRARY")
    if explicit:
        lib = attempt("KVREG_LIBRARY=%s" % explicit, _in_dir(explicit))
        if lib is not None:
            return lib
        raise ImportError("kvreg: cannot load the library KVREG_LIBRARY names (a file, or a "
                          "directory holding %s); tried %s" % (_SONAME, "; ".join(tried)))
    candidates = []
    libdir = _installed_libdir()
    if libdir:
        candidates.append(("the libdir of the meson install", os.path.join(libdir, _SONAME)))
    libdir = pkg_config(env)
    if libdir:
        candidates.append(("pkg-config --variable=libdir kvreg", os.path.join(libdir, _SONAME)))
    else:
        tried.append("pkg-config --variable=libdir kvreg: no answer (no pkg-config, or no "
                     "kvreg.pc on PKG_CONFIG_PATH)")
    candidates.append(("the dynamic loader's default path", _SONAME))
    for label, path in candidates:
        lib = attempt(label, path)
        if lib is not None:
            return lib
    found = ctypes.util.find_library("kvreg")
    if found:
        lib = attempt("ctypes.util.find_library", found)
        if lib is not None:
            return lib
    raise ImportError(
        "kvreg: libkvreg not found; tried %s. Install it (`meson install`, then `ldconfig` "
        "for a system prefix), put its kvreg.pc on PKG_CONFIG_PATH, or set KVREG_LIBRARY to "
        "libkvreg.so.0 or its directory (a build tree has it in build/src/)." % "; ".join(tried))


def _errcheck(result, func, args):
    # Status functions: 0 is KVREG_OK, < 0 a KVREG_E* code. (Yes/no answers come back
    # through an int * output since API 0.2, never through the status.)
    if result < 0:
        raise errors.from_status(result, strerror(result))
    return result


# name: (restype, argtypes, checked). checked=True installs _errcheck.
_PROTOTYPES = {
    "kvreg_strerror": (ctypes.c_char_p, [c_int], False),
    "kvreg_version_number": (ctypes.c_uint, [], False),
    "kvreg_version_string": (ctypes.c_char_p, [], False),
    "kvreg_features": (ctypes.c_uint, [], False),
    # hashing
    "kvreg_block_hash": (c_u64, [u32_p, c_size, c_u64], False),
    "kvreg_sequence_hash": (c_u64, [c_u64, c_u64, c_u64], False),
    "kvreg_hash_blocks": (c_int, [u32_p, c_size, c_u32, c_u64, info_p, c_size, size_p], True),
    # sequences
    "kvreg_sequence_new": (c_int, [ctypes.POINTER(seq_p), c_u32, c_u64], True),
    "kvreg_sequence_free": (None, [seq_p], False),
    "kvreg_sequence_extend": (c_int, [seq_p, u32_p, c_size, size_p], True),
    "kvreg_sequence_append": (c_int, [seq_p, c_u32, int_p], True),
    "kvreg_sequence_truncate": (c_int, [seq_p, c_size], True),
    "kvreg_sequence_unwind": (c_int, [seq_p, c_size], True),
    "kvreg_sequence_pop": (c_int, [seq_p, u32_p], True),
    "kvreg_sequence_reset": (c_int, [seq_p], True),
    "kvreg_sequence_num_blocks": (c_size, [seq_p], False),
    "kvreg_sequence_total_tokens": (c_size, [seq_p], False),
    "kvreg_sequence_block_size": (c_u32, [seq_p], False),
    "kvreg_sequence_salt": (c_u64, [seq_p], False),
    "kvreg_sequence_block": (c_int, [seq_p, c_size, info_p], True),
    "kvreg_sequence_block_tokens": (c_int, [seq_p, c_size, ctypes.POINTER(u32_p), size_p], True),
    "kvreg_sequence_partial_tokens": (c_int, [seq_p, ctypes.POINTER(u32_p), size_p], True),
    # config
    "kvreg_config_new": (c_int, [ctypes.POINTER(cfg_p)], True),
    "kvreg_config_free": (None, [cfg_p], False),
    "kvreg_config_set": (c_int, [cfg_p, c_u32, c_u64], True),
    "kvreg_config_set_event_fn": (c_int, [cfg_p, EVENT_FN, ctypes.c_void_p, DESTROY_FN], True),
    # registry
    "kvreg_registry_new": (c_int, [ctypes.POINTER(reg_p), cfg_p], True),
    "kvreg_registry_free": (None, [reg_p], False),
    "kvreg_registry_set_event_fn": (c_int, [reg_p, EVENT_FN, ctypes.c_void_p, DESTROY_FN], True),
    "kvreg_registry_poll": (c_int, [reg_p, event_p, c_size, size_p], True),
    "kvreg_registry_poll_wait": (c_int, [reg_p, event_p, c_size, size_p, c_int], True),
    "kvreg_registry_wakeup": (c_int, [reg_p], True),
    "kvreg_registry_flush": (c_int, [reg_p], True),
    "kvreg_registry_contains": (c_int, [reg_p, c_u64, int_p], True),
    "kvreg_registry_stat": (c_int, [reg_p, c_u32, u64_p], True),
    "kvreg_registry_clear": (c_int, [reg_p], True),
    "kvreg_registry_snapshot": (c_int, [reg_p, ctypes.POINTER(snap_p)], True),
    "kvreg_snapshot_free": (None, [snap_p], False),
    "kvreg_snapshot_position": (c_u64, [snap_p], False),
    "kvreg_snapshot_events": (c_int, [snap_p, ctypes.POINTER(event_p), size_p], True),
    # pools
    "kvreg_pool_new": (c_int, [ctypes.POINTER(pool_p), reg_p, ctypes.c_char_p], True),
    "kvreg_pool_new_medium": (c_int, [ctypes.POINTER(pool_p), reg_p, ctypes.c_char_p, c_u32], True),
    "kvreg_pool_medium": (c_u32, [pool_p], False),
    "kvreg_pool_free": (None, [pool_p], False),
    "kvreg_pool_id": (c_u32, [pool_p], False),
    "kvreg_pool_name": (ctypes.c_char_p, [pool_p], False),
    "kvreg_pool_size": (c_size, [pool_p], False),
    # registering and releasing
    "kvreg_register": (c_int, [pool_p, desc_p, block_p], True),
    "kvreg_register_batch": (c_int, [pool_p, desc_p, c_size, block_p, int_p, size_p], True),
    "kvreg_register_sequence_block": (c_int, [pool_p, seq_p, c_size, block_p], True),
    "kvreg_register_sequence": (c_int, [pool_p, seq_p, c_size, c_size, block_p, int_p, size_p],
                                True),
    "kvreg_acquire": (c_int, [pool_p, c_u64, block_p], True),
    "kvreg_acquire_prefix": (c_int, [pool_p, u64_p, c_size, block_p, size_p], True),
    "kvreg_release": (c_int, [pool_p, kvreg_block], True),
    "kvreg_release_batch": (c_int, [pool_p, block_p, c_size, int_p, size_p], True),
    # queries
    "kvreg_pool_contains": (c_int, [pool_p, c_u64, int_p], True),
    "kvreg_pool_match": (c_int, [pool_p, u64_p, c_size, size_p], True),
    "kvreg_block_get_info": (c_int, [pool_p, kvreg_block, info_p], True),
    "kvreg_block_refcount": (c_int, [pool_p, kvreg_block, u32_p], True),
    "kvreg_block_tokens": (c_int, [pool_p, kvreg_block, u32_p, c_size, size_p], True),
    # 0.6: regular names (the 0.x names above are their aliases) and the option family
    "kvreg_pool_register": (c_int, [pool_p, pdesc_p, block_p], True),
    "kvreg_pool_register_batch": (c_int, [pool_p, pdesc_p, c_size, block_p, int_p, size_p], True),
    "kvreg_pool_register_sequence_block": (c_int, [pool_p, seq_p, c_size, block_p], True),
    "kvreg_pool_register_sequence": (c_int, [pool_p, seq_p, c_size, c_size, block_p, int_p,
                                             size_p], True),
    "kvreg_pool_acquire": (c_int, [pool_p, c_u64, block_p], True),
    "kvreg_pool_acquire_prefix": (c_int, [pool_p, u64_p, c_size, block_p, size_p], True),
    "kvreg_pool_release": (c_int, [pool_p, kvreg_block], True),
    "kvreg_pool_release_batch": (c_int, [pool_p, block_p, c_size, int_p, size_p], True),
    "kvreg_pool_block_info": (c_int, [pool_p, kvreg_block, info_p], True),
    "kvreg_pool_block_refcount": (c_int, [pool_p, kvreg_block, u32_p], True),
    "kvreg_pool_block_tokens": (c_int, [pool_p, kvreg_block, u32_p, c_size, size_p], True),
    "kvreg_config_get": (c_int, [cfg_p, c_u32, u64_p], True),
    "kvreg_registry_get": (c_int, [reg_p, c_u32, u64_p], True),
    "kvreg_pool_set": (c_int, [pool_p, c_u32, c_u64], True),
    "kvreg_pool_get": (c_int, [pool_p, c_u32, u64_p], True),
    "kvreg_pool_get_string": (c_int, [pool_p, c_u32, ctypes.c_char_p, c_size, size_p], True),
}


def _bind(cdll):
    missing = []
    for name, (restype, argtypes, checked) in _PROTOTYPES.items():
        try:
            fn = getattr(cdll, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.restype = restype
        fn.argtypes = argtypes
        if checked:
            fn.errcheck = _errcheck
    if missing:
        raise ImportError("kvreg: %s lacks symbols %s (library too old?)"
                          % (getattr(cdll, "_name", "libkvreg"), ", ".join(missing)))


lib = _load()
_bind(lib)


def strerror(status):
    return lib.kvreg_strerror(status).decode("utf-8", "replace")


def _check_version():
    number = lib.kvreg_version_number()
    if number // 10000 != ABI_MAJOR:
        raise ImportError(
            "kvreg: %s is version %s (major %d); this binding needs major %d"
            % (getattr(lib, "_name", "libkvreg"), lib.kvreg_version_string().decode(),
               number // 10000, ABI_MAJOR))


_check_version()
