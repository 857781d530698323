#!/usr/bin/env bash
# Side-by-side benchmark: the seed design's peer (../shared/peers/seed-rust) against kvreg-bench.
# Builds both (release), runs every workload alternately N times with the same flags, checks the
# checksums agree, and prints a Markdown table of medians and ratios (bench/compare_table.py).
# `threads` runs at every T of --thread-counts in both programs; disjoint, hol, pool_free, many_pools,
# scaling_limit, index_k1 and index_k2 are kvreg-only (the seed design has no counterpart) and run
# kvreg-bench alone (the index workloads against Dynamo's published figures, their own table).
#
#   bench/compare.sh            # full sizes (the peer's defaults), 5 runs each
#   bench/compare.sh --quick    # small sizes, 2 runs: a sanity check in seconds
#   options: --runs N   --build-dir DIR (default /tmp/kvreg-bench-release)
#            --keep DIR (keep the raw JSON lines there)   --workloads "hash threads ..."
#            --thread-counts "1 2 4 8" (threads)   --disjoint-threads T (2)
# Environment: CARGO_TARGET_DIR (default /tmp/seed-peer), PEER_SRC (default ../shared/peers/seed-rust).
# The peer is never built inside its own folder (read-only in CI).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
peer_src=${PEER_SRC:-$src/../shared/peers/seed-rust}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/seed-peer}
build=/tmp/kvreg-bench-release
runs=""
quick=0
keep=""
workloads="hash register_release two_pools shared_prefix threads hold disjoint hol pool_free many_pools scaling_limit index_k1 index_k2"
thread_counts="1 2 4 8"
disjoint_threads=2
workloads_given=0

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --runs) runs=${2:?}; shift ;;
        --build-dir) build=${2:?}; shift ;;
        --keep) keep=${2:?}; shift ;;
        --workloads) workloads=${2:?}; workloads_given=1; shift ;;
        --thread-counts) thread_counts=${2:?}; shift ;;
        --disjoint-threads) disjoint_threads=${2:?}; shift ;;
        -h|--help) usage ;;
        *) echo "compare.sh: unknown argument $1" >&2; usage ;;
    esac
    shift
done
# Default runs: 5, or 2 with --quick; an explicit --runs wins either way.
[ -n "$runs" ] || { [ "$quick" = 1 ] && runs=2 || runs=5; }
[ "$runs" -ge 1 ] 2>/dev/null || { echo "compare.sh: --runs must be a number >= 1" >&2; exit 2; }

# The peer is needed only for the workloads it has (e.g. not for --workloads "index_k1 index_k2").
peer=$CARGO_TARGET_DIR/release/seed-peer
need_peer=0
for w in $workloads; do
    case "$w" in disjoint|hol|pool_free|many_pools|scaling_limit|index_k1|index_k2) ;; *) need_peer=1 ;; esac
done
if [ "$need_peer" = 1 ]; then
    echo "== building seed-peer (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)" >&2
    "$peer_src/build.sh" >&2
fi

echo "== building kvreg-bench (release, $build)" >&2
# Only the library and kvreg-bench are needed: leave the other parts out of this build.
opts=(-Dbench=true -Dexamples=false -Dbindings_tests=disabled -Dfuzz=disabled)
if [ -f "$build/build.ninja" ]; then
    meson configure "$build" -Dbuildtype=release "${opts[@]}" >&2
else
    meson setup --buildtype=release "${opts[@]}" "$build" "$src" >&2
fi
meson compile -C "$build" kvreg-bench >&2
ours=$build/bench/kvreg-bench
[ -x "$ours" ] || { echo "compare.sh: $ours was not built (is cmocka installed? tests/ needs it)" >&2; exit 1; }

# Per-workload size flags; the same for both programs, so the checksums must agree.
sizes() {
    if [ "$quick" = 1 ]; then
        case "$1" in
            hash) echo "--seqs 200" ;;
            threads) echo "--seqs 512 --rounds 2" ;;
            hold) echo "--blocks 100000" ;;
            disjoint) echo "--seqs 512 --rounds 4" ;;
            hol) echo "" ;;
            pool_free) echo "--big-pool 200000" ;;
            many_pools) echo "--seqs 200" ;;
            scaling_limit) echo "--seqs 512 --rounds 4 --limit-ops 500000 --reps 1" ;;
            index_k1) echo "--workers 50 --dup 2 --windows 1000,500" ;;
            index_k2) echo "--workers 4 --trace-dup 2 --length-factor 2 --capacity 256 --windows 1000,500" ;;
            *) echo "--seqs 2000" ;;
        esac
    fi
}

out=${keep:-$(mktemp -d)}
mkdir -p "$out"
: > "$out/peer.jsonl"; : > "$out/ours.jsonl"
[ -n "$keep" ] || trap 'rm -rf "$out"' EXIT

run() { # file, command...: append the command's JSON lines, fail loudly on a failed run
    local f=$1; shift
    if ! "$@" >> "$f"; then
        echo "compare.sh: FAILED: $*" >&2
        exit 1
    fi
}

# One run of a workload both programs have; r odd: the peer goes first, r even: kvreg first,
# so drift on a noisy machine hits both alike.
both() { # r, kvreg-only extra flags, common flags...
    local r=$1 ours_extra=$2; shift 2
    [ $((r % 2)) = 1 ] && run "$out/peer.jsonl" "$peer" "$@"
    # shellcheck disable=SC2086 # ours_extra is a list of flags
    run "$out/ours.jsonl" "$ours" "$@" $ours_extra
    [ $((r % 2)) = 0 ] && run "$out/peer.jsonl" "$peer" "$@"
    return 0
}

for w in $workloads; do
    read -ra sz <<< "$(sizes "$w")"
    for r in $(seq 1 "$runs"); do
        echo "== $w run $r/$runs" >&2
        case "$w" in
            threads)
                for t in $thread_counts; do
                    # kvreg's T/1 ratio from the same process: 1 thread right after T threads.
                    extra=""; [ "$t" -gt 1 ] && extra="--threads-scaling"
                    both "$r" "$extra" --workload threads --threads "$t" "${sz[@]}"
                done ;;
            hold)
                both "$r" "" --workload hold "${sz[@]}"
                run "$out/ours.jsonl" "$ours" --workload hold_tokens "${sz[@]}" ;;
            disjoint) # kvreg only; each run also measures 1 thread (scaling_ratio)
                for d in inline poll; do
                    run "$out/ours.jsonl" "$ours" --workload disjoint --delivery "$d" \
                        --threads "$disjoint_threads" "${sz[@]}"
                done ;;
            hol|pool_free|many_pools|scaling_limit|index_k1|index_k2) # kvreg only
                run "$out/ours.jsonl" "$ours" --workload "$w" "${sz[@]}" ;;
            register_release|two_pools|shared_prefix)
                both "$r" "" --workload "$w" "${sz[@]}"
                # kvreg again with its memory set aside first, as an engine that knows its
                # KV cache's size would (KVREG_OPT_RESERVE_BLOCKS; rows marked "reserved").
                run "$out/ours.jsonl" "$ours" --workload "$w" --reserve-blocks auto "${sz[@]}" ;;
            *)
                both "$r" "" --workload "$w" "${sz[@]}" ;;
        esac
    done
done

cmd="bench/compare.sh"
[ "$quick" = 1 ] && cmd="$cmd --quick"
[ "$workloads_given" = 1 ] && cmd="$cmd --workloads \"$workloads\""
python3 "$here/compare_table.py" --runs "$runs" --command "$cmd --runs $runs" \
    "$out/peer.jsonl" "$out/ours.jsonl"
