#!/bin/sh
# The version lives in meson.build's project(); the files that must repeat it (other tools
# read them: debian/changelog for dpkg, the Cargo.toml files for cargo, the Python package's
# _version.py for pip) must name the same one. debian/changelog: its upstream part (its own
# "-N" Debian revision and any "N:" epoch aside).
# Usage: check_version.sh SOURCE_ROOT MESON_PROJECT_VERSION
set -eu
src=$1 meson_version=$2
top=$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' "$src/debian/changelog")
[ -n "$top" ] || { echo "FAIL: cannot read the version of $src/debian/changelog"; exit 1; }
upstream=${top#*:}
upstream=${upstream%-*}
if [ "$upstream" != "$meson_version" ]; then
    echo "FAIL: debian/changelog is at $top (upstream $upstream) but meson.build says $meson_version"
    echo "      add a debian/changelog entry for $meson_version-1 (dch -v $meson_version-1)"
    exit 1
fi
for f in bindings/rust/kvreg-sys/Cargo.toml bindings/rust/kvreg/Cargo.toml; do
    v=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$src/$f" | head -1)
    [ "$v" = "$meson_version" ] || { echo "FAIL: $f says version $v, meson.build $meson_version"; exit 1; }
done
v=$(sed -n 's/^kvreg-sys = .*version = "\([^"]*\)".*/\1/p' "$src/bindings/rust/kvreg/Cargo.toml")
[ "$v" = "$meson_version" ] || { echo "FAIL: kvreg's dependency on kvreg-sys is $v, meson.build $meson_version"; exit 1; }
v=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$src/bindings/python/kvreg/_version.py")
[ "$v" = "$meson_version" ] || { echo "FAIL: bindings/python/kvreg/_version.py says $v, meson.build $meson_version"; exit 1; }
echo "meson.build $meson_version == debian/changelog $top == Cargo.toml files == _version.py"
