#!/usr/bin/env python3
"""Exported symbols == version script == KVREG_API declarations.

Usage: check_symbols.py LIBRARY MAP HEADER|INCLUDE_DIR [NM]

The dynamic symbol table of the built library (nm -D --defined-only), the `global:` names of
src/libkvreg.map and the functions declared KVREG_API in the public headers (HEADER and every
other kvreg*.h beside it: kvreg_wire.h, ...) must be the same set,
and every export must carry a LIBKVREG_ version (so a leak or a forgotten map entry fails here,
as libinput's symbols-leak-test and GTK's abicheck.sh do).
"""
import glob
import os
import re
import subprocess
import sys


def exported(lib, nm):
    out = subprocess.run([nm, '-D', '--defined-only', lib], check=True,
                         capture_output=True, text=True).stdout
    syms, unversioned = set(), []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[1] == 'A':  # 'A': the version node itself
            continue
        name, _, version = parts[2].partition('@')
        syms.add(name)
        if not version.lstrip('@').startswith('LIBKVREG_'):
            unversioned.append(parts[2])
    return syms, unversioned


def from_map(path):
    text = re.sub(r'/\*.*?\*/', '', open(path).read(), flags=re.S)
    names = set()
    for block in re.findall(r'global:(.*?)(?:local:|\})', text, flags=re.S):
        names.update(n for n in re.findall(r'([A-Za-z_]\w*)\s*;', block))
    return names


def from_header(path):
    names = set()
    for header in sorted(glob.glob(os.path.join(os.path.dirname(path), 'kvreg*.h'))):
        text = re.sub(r'/\*.*?\*/', '', open(header).read(), flags=re.S)
        names.update(re.findall(r'\bKVREG_API\b[^;{]*?\b(kvreg_\w+)\s*\(', text))
    return names


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    lib, mapfile, header = sys.argv[1:4]
    nm = sys.argv[4] if len(sys.argv) > 4 else 'nm'
    syms, unversioned = exported(lib, nm)
    sets = {'exported': syms, 'map': from_map(mapfile), 'header': from_header(header)}
    ok = True
    for a in sets:
        for b in sets:
            extra = sorted(sets[a] - sets[b])
            if a < b and (extra or sets[b] - sets[a]):
                ok = False
                print(f'{a} but not {b}: {extra}')
                print(f'{b} but not {a}: {sorted(sets[b] - sets[a])}')
    if unversioned:
        ok = False
        print(f'exported without a LIBKVREG_ version: {unversioned}')
    print(f'{len(syms)} exported symbols; map {len(sets["map"])}; header {len(sets["header"])}')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
