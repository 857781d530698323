#!/bin/sh
# The Debian packages, end to end, on this machine (suite 'packaging': slow, run on request
# and by .ci/run, never by the plain `meson test`):
#   1. git clone the committed tree into a temporary directory (a clean clone);
#   2. dpkg-buildpackage -us -uc -b there, with no network (a private network namespace with
#      only loopback) - the build runs the test suite (debian/rules, override_dh_auto_test);
#   3. lintian on the result: no error and no warning (overrides need a reason);
#   4. dpkg -i the packages, run the autopkgtest scripts (debian/tests) against the installed
#      files, and remove the packages again (also on failure), checking nothing is left.
# Needs root (dpkg -i) and the build dependencies (.ci/packages/deb.txt).
# Usage: build_and_install.sh SOURCE_ROOT
set -eu
src=$(cd "$1" && pwd)
packages="libkvreg0 libkvreg-dev kvreg-tools python3-kvreg golang-github-libkvreg-libkvreg-dev"
say() { echo "== packaging: $* ($(date +%T))"; }

if [ "$(id -u)" -ne 0 ]; then
    echo "FAIL: the packaging test installs packages with dpkg -i: run it as root"
    exit 1
fi
# Never touch an installation this test did not make.
for p in $packages; do
    if dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^[a-z]i'; then
        echo "FAIL: $p is already installed on this machine; remove it first (dpkg -r $p)"
        exit 1
    fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvreg-packaging.XXXXXX")
installed=""
cleanup() {
    rc=$?
    if [ -n "$installed" ]; then
        say "removing $installed"
        # shellcheck disable=SC2086
        dpkg_locked --purge $installed >"$tmp/remove.log" 2>&1 || { cat "$tmp/remove.log"; rc=1; }
    fi
    rm -rf "$tmp"
    exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# Other work on the machine may hold the dpkg lock for a while (apt-get install): wait.
dpkg_locked() {
    tries=0
    while :; do
        if dpkg "$@" >"$tmp/dpkg.out" 2>&1; then cat "$tmp/dpkg.out"; return 0; fi
        if grep -q 'lock' "$tmp/dpkg.out" && [ "$tries" -lt 60 ]; then
            tries=$((tries + 1)); sleep 5; continue
        fi
        cat "$tmp/dpkg.out"; return 1
    done
}

say "clean clone of $src"
git clone --quiet --no-hardlinks "$src" "$tmp/libkvreg"
cd "$tmp/libkvreg"
dpkg-checkbuilddeps || { echo "FAIL: build dependencies missing: bash .ci/install-deps"; exit 1; }

# No network during the build: a network namespace with loopback only (the test suite's
# 127.0.0.1 tests still work). DEB_BUILD_OPTIONS: parallel=2 (the CI machine has 2 cores)
# unless KVREG_DEB_BUILD_OPTIONS says otherwise (e.g. "nocheck parallel=2" to skip the suite).
export DEB_BUILD_OPTIONS="${KVREG_DEB_BUILD_OPTIONS:-parallel=2}"
say "DEB_BUILD_OPTIONS='$DEB_BUILD_OPTIONS' dpkg-buildpackage -us -uc -b (offline)"
build="env -u MAKEFLAGS -u MESON_TESTTHREADS dpkg-buildpackage -us -uc -b"
if unshare --net true 2>/dev/null && command -v ip >/dev/null 2>&1; then
    unshare --net sh -c "ip link set lo up && $build" >"$tmp/build.log" 2>&1 || {
        tail -150 "$tmp/build.log"; echo "FAIL: dpkg-buildpackage (log above)"; exit 1; }
else
    echo "NOTE: no network namespace here (unshare --net or ip missing): building with network"
    $build >"$tmp/build.log" 2>&1 || {
        tail -150 "$tmp/build.log"; echo "FAIL: dpkg-buildpackage (log above)"; exit 1; }
fi
grep -E '^(Ok|Fail|Skipped|Expected Fail|Timeout): ' "$tmp/build.log" || true
changes=$(ls "$tmp"/libkvreg_*.changes)

say "lintian"
lintian --fail-on error,warning --info "$changes" || { echo "FAIL: lintian (above)"; exit 1; }

debs=""
for p in $packages; do
    deb=$(ls "$tmp/${p}_"*.deb 2>/dev/null || true)
    [ -n "$deb" ] || { echo "FAIL: no $p package was built"; exit 1; }
    debs="$debs $deb"
done
say "dpkg -i$debs"
installed=$packages
# shellcheck disable=SC2086
dpkg_locked -i $debs

# A system prefix gets no RUNPATH, in programs or in what kvreg.pc gives (the same rule
# tests/install/install_test.sh checks on a /usr/local build; CI's main build has a private
# prefix, so this is where CI checks it).
for f in /usr/bin/kvreg-replay /usr/bin/kvreg-events; do
    [ -e "$f" ] || continue
    if readelf -d "$f" | grep -Eq '\((RUNPATH|RPATH)\)'; then echo "FAIL: $f has a RUNPATH"; exit 1; fi
done
pc=$(dpkg -L libkvreg-dev 2>/dev/null | grep '/kvreg\.pc$' || true)
if [ -n "$pc" ] && grep -q -- '-rpath' "$pc"; then echo "FAIL: $pc gives an rpath"; exit 1; fi

for t in $(sed -n 's/^Tests: *//p' debian/tests/control); do
    say "debian/tests/$t"
    env -u AUTOPKGTEST_TMP "debian/tests/$t" || { echo "FAIL: debian/tests/$t"; exit 1; }
done

say "dpkg --purge $installed"
# shellcheck disable=SC2086
dpkg_locked --purge $installed
installed=""
for p in $packages; do
    if dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -qv '^un\|^pn'; then
        echo "FAIL: $p is still known to dpkg after --purge"; exit 1
    fi
done
for path in /usr/lib/python3/dist-packages/kvreg /usr/share/gocode/src/github.com/libkvreg \
            /usr/include/kvreg.h /usr/bin/kvreg-replay; do
    [ ! -e "$path" ] || { echo "FAIL: $path left behind after removal"; exit 1; }
done
say "built, lint-clean, installed, tested and removed: $packages"
