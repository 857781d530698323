#!/bin/sh
# The version lives in meson.build's project(); debian/changelog must name the same upstream
# version (its own "-N" Debian revision and any "N:" epoch aside).
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
echo "meson.build $meson_version == debian/changelog $top"
