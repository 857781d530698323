#!/bin/sh
# `pip install` of the binding into a fresh virtual environment, offline (Debian's setuptools
# from the system site packages, no index, no build isolation), then the binding's own test
# suite run from there against the installed copy, not the source tree.
# Usage: pip_install_test.sh BINDING_SOURCE_DIR LIBKVREG_PATH VECTORS_JSON
# Exit 77 (skipped) with the reason when venv, pip or setuptools are missing.
set -eu
src=$(cd "$1" && pwd) lib=$(realpath "$2") vectors=$(realpath "$3")
# The first interpreter that can build offline: $PYTHON, python3 on PATH, then Debian's own
# (a python3 from pyenv or similar may come first on PATH without setuptools or wheel).
py=
for cand in ${PYTHON:-} python3 /usr/bin/python3; do
    if "$cand" -c "import venv, ensurepip, setuptools, wheel" >/dev/null 2>&1; then
        py=$cand
        break
    fi
done
if [ -z "$py" ]; then
    echo "SKIP: no python3 with the modules venv, ensurepip, setuptools and wheel (Debian:" \
         "python3-venv, python3-setuptools, python3-wheel)"
    exit 77
fi
echo "interpreter: $(command -v "$py") ($("$py" --version 2>&1))"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvreg-pip.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# setuptools writes build/ and *.egg-info next to the sources: build from a copy.
mkdir "$tmp/src" "$tmp/run"
cp -R "$src/kvreg" "$src/pyproject.toml" "$src/README.md" "$tmp/src/"
rm -f "$tmp/src/kvreg/_config.py.in"
cp -R "$src/tests" "$tmp/run/"
"$py" -m venv --system-site-packages "$tmp/venv"
PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "$tmp/venv/bin/python" -m pip install \
    --quiet --no-build-isolation --no-index "$tmp/src"

cd "$tmp/run"
# the tests' copy is outside the source tree: name the one vLLM rule checker they load
export KVREG_LIBRARY="$lib" KVREG_VECTORS="$vectors" PYTHONDONTWRITEBYTECODE=1 \
    KVREG_VLLM_RULES="$src/../../tests/wire/check_vllm_rules.py"
unset PYTHONPATH
where=$("$tmp/venv/bin/python" -c 'import kvreg, sys; print(kvreg.__file__, kvreg.__version__)')
echo "installed: $where"
case $where in "$tmp/venv/"*) ;; *) echo "FAIL: kvreg was not imported from the venv"; exit 1 ;; esac
"$tmp/venv/bin/pip" show kvreg | sed -n 's/^\(Name\|Version\|Location\): /  \1: /p'
exec "$tmp/venv/bin/python" -X dev -W error::ResourceWarning -m unittest discover -s tests -t . -v
