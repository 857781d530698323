"""The binding's version: the libkvreg release it was written against (the project version in
the top-level meson.build; the test suite checks that they agree with the loaded library)."""

__version__ = "0.6.0"
