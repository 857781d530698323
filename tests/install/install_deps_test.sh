#!/bin/sh
# .ci/install-deps on the three machines a newcomer may have: root without sudo (a fresh
# Debian container), a user with sudo, a user without sudo (must stop with a message naming
# root and the packages, not "sudo: command not found"). `id` and `sudo` are stand-ins on a
# private PATH, and --dry-run prints the apt-get commands instead of running them.
# Usage: install_deps_test.sh SOURCE_ROOT
set -eu
src=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvreg-deps.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
bin=$tmp/bin
mkdir "$bin"
for tool in bash sed tr sort dirname cat; do
    ln -s "$(command -v "$tool")" "$bin/$tool"
done
fake_id() { printf '#!/bin/sh\necho %s\n' "$1" >"$bin/id"; chmod +x "$bin/id"; }
run() { env -i PATH="$bin" bash "$src/.ci/install-deps" "$@" >"$tmp/out" 2>&1; }

fake_id 0
run --dry-run || { cat "$tmp/out"; echo "FAIL: root without sudo"; exit 1; }
grep -qx 'apt-get install -y -q --no-install-recommends .*libxxhash-dev.*' "$tmp/out" ||
    { cat "$tmp/out"; echo "FAIL: as root: no plain apt-get install of the core packages"; exit 1; }
echo "root, no sudo: apt-get runs directly"

fake_id 1000
if run --dry-run; then cat "$tmp/out"; echo "FAIL: a user without sudo got exit 0"; exit 1; fi
grep -q 'needs root' "$tmp/out" && grep -q 'libxxhash-dev' "$tmp/out" ||
    { cat "$tmp/out"; echo "FAIL: a user without sudo: no message naming root and the packages"; exit 1; }
echo "user, no sudo: $(head -1 "$tmp/out")"

printf '#!/bin/sh\nexit 0\n' >"$bin/sudo"; chmod +x "$bin/sudo"
run --all --dry-run || { cat "$tmp/out"; echo "FAIL: user with sudo"; exit 1; }
grep -q '^sudo apt-get install .*golang-go' "$tmp/out" ||
    { cat "$tmp/out"; echo "FAIL: a user with sudo: apt-get not through sudo, or --all ignored"; exit 1; }
echo "user with sudo: apt-get through sudo"
