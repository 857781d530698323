#!/bin/sh
# ABI check of the built library against the committed baseline (tests/abi/libkvreg.abi).
# Usage: check_abi.sh ABIDIFF BASELINE LIBRARY PUBLIC_HEADER_DIR...
#
# The baseline is the ABI of release 0.4.0, and it stays that until a release: within the 0.x
# series the ABI may only grow. abidiff's exit status is a bit mask: 1 error, 2 usage, 4 ABI
# change, 8 incompatible change. The check runs abidiff twice:
#   --no-added-syms: any change left (a removed or changed function, type or variable) fails;
#   --added-fns --added-vars: lists what was added (never a failure: new symbols must also be
#     in a new node of src/libkvreg.map, which the 'symbols' test checks).
# At a release, regenerate the baseline with:
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
"$abidiff" --drop-private-types --no-added-syms $hd "$baseline" "$lib"
rc=$?
if [ $((rc & 8)) -ne 0 ]; then
    echo "FAIL: incompatible ABI change (abidiff exit $rc): bump the soversion or undo it"
    exit 1
elif [ $((rc & 4)) -ne 0 ]; then
    echo "FAIL: the ABI changed other than by additions (abidiff exit $rc, report above):"
    echo "      0.x releases only add to the ABI of $baseline"
    exit 1
elif [ $rc -ne 0 ]; then
    echo "FAIL: abidiff could not compare (exit $rc)"
    exit 1
fi
# shellcheck disable=SC2086
added=$("$abidiff" --drop-private-types --added-fns --added-vars $hd "$baseline" "$lib" | grep -c "^  \[A\]")
echo "ABI: the baseline $baseline unchanged, $added functions or variables added"
