#!/usr/bin/env python3
"""The layering of src/: every #include between src/ folders must point down.

    api     the C boundary: every kvreg_* entry point           (top)
    nats    the NATS JetStream event plane
    index   the router-side prefix index     net   the ZeroMQ publisher and subscriber
    wire    the msgpack encoders and decoders
    core    hashing, sequences, the registry and its pools
    events  event batches, ids and delivery
    util    small helpers with no kvreg state                  (bottom)

A folder may include its own files, the public headers (include/) and the folders below it;
folders on one line may not include each other. Prints the include graph between folders
(`--graph`), exits 1 on an upward or sideways edge, naming the file and line.
Usage: check_layers.py SRC_DIR [--graph]"""
import os
import re
import sys

RANK = {'util': 0, 'events': 1, 'core': 2, 'wire': 3, 'index': 4, 'net': 4, 'nats': 5, 'api': 6}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    src = sys.argv[1]
    edges, bad = {}, []
    for folder in sorted(os.listdir(src)):
        path = os.path.join(src, folder)
        if not os.path.isdir(path):
            continue
        if folder not in RANK:
            bad.append(f'{folder}/: a folder with no place in the layering (add it to RANK)')
            continue
        for name in sorted(os.listdir(path)):
            if not name.endswith(('.c', '.cpp', '.h', '.hpp')):
                continue
            with open(os.path.join(path, name), encoding='utf-8') as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m or '/' not in m.group(1):
                        continue  # public header or a file of the same folder
                    target = m.group(1).split('/')[0]
                    if target == folder:
                        continue
                    edges[(folder, target)] = edges.get((folder, target), 0) + 1
                    if target not in RANK or RANK[target] >= RANK[folder]:
                        bad.append(f'{folder}/{name}:{lineno}: includes "{m.group(1)}" '
                                   f'({folder} may not depend on {target})')
    if '--graph' in sys.argv:
        for (a, b), n in sorted(edges.items(), key=lambda e: (-RANK.get(e[0][0], 9), e[0])):
            print(f'{a} -> {b} ({n} includes)')
    for b in bad:
        print('FAIL:', b)
    if not edges and not bad:
        print('FAIL: no includes between folders found: is', src, 'the source tree?')
        return 1
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
