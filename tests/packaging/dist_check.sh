#!/bin/sh
# The release tarball (suite 'packaging': slow, run by .ci/run): `meson dist` packs the
# committed tree (git archive of HEAD) into libkvreg-VERSION.tar.xz, unpacks it, configures,
# builds and runs the test suite there (Meson's dist check), so a release builds and passes
# from its tarball alone, without the git checkout. The tarball's name must carry the one
# version, meson.build's. Usage: dist_check.sh SOURCE_ROOT VERSION
set -eu
src=$(cd "$1" && pwd)
version=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvreg-dist.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# Uncommitted changes are not in the tarball (git archive of HEAD): say so rather than test
# something other than what is being worked on.
dirty=""
if [ -n "$(git -C "$src" status --porcelain --untracked-files=no)" ]; then
    echo "NOTE: $src has uncommitted changes; the tarball holds HEAD only"
    dirty=--allow-dirty
fi
echo "== dist: meson setup + meson dist ($(date +%T))"
meson setup "$tmp/build" "$src" --wrap-mode=nodownload >"$tmp/setup.log" 2>&1 || {
    cat "$tmp/setup.log"; echo "FAIL: meson setup"; exit 1; }
# The dist check builds and tests in its own directory: keep its test run to the default setup
# (no packaging suite inside the dist check), with the same parallelism as the CI machine.
# KVREG_DIST_NO_TESTS=1 (.ci/run, whose other passes already built and tested this tree):
# pack and check the tarball's contents only, `meson dist --no-tests`.
no_tests=""
[ "${KVREG_DIST_NO_TESTS:-0}" = 1 ] && no_tests=--no-tests
if ! env MESON_TESTTHREADS=2 meson dist -C "$tmp/build" --formats xztar $dirty $no_tests >"$tmp/dist.log" 2>&1; then
    tail -80 "$tmp/dist.log"; echo "FAIL: meson dist (its dist check, log above)"; exit 1
fi
grep -E '^(Ok|Fail|Skipped|Expected Fail|Timeout): ' "$tmp/dist.log" || true
tarball="$tmp/build/meson-dist/libkvreg-$version.tar.xz"
[ -s "$tarball" ] || { ls "$tmp/build/meson-dist"; echo "FAIL: no $tarball"; exit 1; }
for f in include/kvreg.h src/libkvreg.map LICENSE data/traces/NOTICE debian/control; do
    tar -tJf "$tarball" "libkvreg-$version/$f" >/dev/null 2>&1 || {
        echo "FAIL: $f is not in the tarball"; exit 1; }
done
if [ -n "$no_tests" ]; then what="packed (--no-tests)"; else what="built and passed its own test suite"; fi
echo "dist: $(basename "$tarball") ($(du -h "$tarball" | cut -f1)) $what"
