"""The binding's unittest suite.

Besides the tests, the suite checks that it follows the binding's own lifetime rule: every
Registry, Pool and Block it creates is closed or released explicitly. The binding's safety
nets report a forgotten one with a ResourceWarning (see README, "Lifetime"); LEAKS records
those whether the warning is shown (default filters) or raised inside a finalizer (under
`-W error::ResourceWarning`, where it reaches sys.unraisablehook), and a check that runs
after every other test of a full discovery run fails if there was any. Tests that leak on
purpose catch their warnings with warnings.catch_warnings(record=True), so they are not
counted.
"""

import gc
import os
import sys
import unittest
import warnings

LEAKS = []


def _is_kvreg_leak(message, category):
    return issubclass(category, ResourceWarning) and "kvreg." in str(message)


_show = warnings.showwarning


def _showwarning(message, category, filename, lineno, file=None, line=None):
    if _is_kvreg_leak(message, category):
        LEAKS.append(str(message))
    _show(message, category, filename, lineno, file, line)


_unraisable = sys.unraisablehook


def _unraisablehook(info):
    exc = info.exc_value
    if exc is not None and _is_kvreg_leak(exc, type(exc)):
        LEAKS.append(str(exc))
    _unraisable(info)


warnings.showwarning = _showwarning
sys.unraisablehook = _unraisablehook


def _no_leaks_check():
    # Made here, not at module level, so that loading this package's own tests does not
    # pick it up first.
    class NoLeaks(unittest.TestCase):
        """Runs last: no test left a kvreg object for the garbage collector to find open."""

        def test_no_kvreg_resource_warnings(self):
            gc.collect()
            self.assertEqual(LEAKS, [], "objects left open or unreleased (see warnings above)")

    return NoLeaks("test_no_kvreg_resource_warnings")


def load_tests(loader, standard_tests, pattern):
    # The documented discovery hook: load the modules of this package, then the check.
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.dirname(here)
    standard_tests.addTests(loader.discover(start_dir=here, pattern=pattern or "test*.py",
                                            top_level_dir=top))
    standard_tests.addTest(_no_leaks_check())
    return standard_tests
