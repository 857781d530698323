#!/bin/sh
# ABI check of the built library against the committed baseline (tests/abi/libkvreg.abi).
# Usage: check_abi.sh ABIDIFF BASELINE LIBRARY PUBLIC_HEADER_DIR...
#
# abidiff's exit status is a bit mask: 1 error, 2 usage, 4 ABI change, 8 incompatible change.
# 8 always fails. 4 alone (e.g. a new function) fails too, because then the baseline was not
# regenerated in the commit that changed the ABI (the commit must also add the new symbols to
# a new node of src/libkvreg.map, which the 'symbols' test checks). Regenerate with:
#   abidw --headers-dir include --headers-dir BUILD/include --drop-private-types \
#     --exported-interfaces-only --no-show-locs --no-corpus-path --no-comp-dir-path \
#     --out-file tests/abi/libkvreg.abi BUILD/src/libkvreg.so.0.*
set -u
abidiff=$1 baseline=$2 lib=$3
shift 3
hd=""
for d in "$@"; do hd="$hd --headers-dir2 $d"; done

if ! readelf -S "$lib" 2>/dev/null | grep -q '\.debug_info'; then
    echo "SKIP: $lib has no debug info (abidiff needs -g; buildtype plain/release without -g)"
    exit 77
fi
# shellcheck disable=SC2086
"$abidiff" --drop-private-types $hd "$baseline" "$lib"
rc=$?
if [ $((rc & 8)) -ne 0 ]; then
    echo "FAIL: incompatible ABI change (abidiff exit $rc): bump the soversion or undo it"
    exit 1
elif [ $((rc & 4)) -ne 0 ]; then
    echo "FAIL: the ABI changed compatibly (abidiff exit $rc) but tests/abi/libkvreg.abi was not"
    echo "      regenerated; see the abidw command at the top of tests/abi/check_abi.sh"
    exit 1
elif [ $rc -ne 0 ]; then
    echo "FAIL: abidiff could not compare (exit $rc)"
    exit 1
fi
echo "ABI identical to the baseline $baseline"
