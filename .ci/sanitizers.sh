#!/usr/bin/env bash
# Sanitizer, valgrind and fuzz passes, run by .ci/run after the main suite, from the
# repository root, with the main build in ./build. Budget on 2 cores: about 10 minutes.
#   1. ASan+UBSan build with clang, the libFuzzer targets built in it (-Dfuzz=enabled,
#      -fsanitize=fuzzer-no-link on the whole tree: the library is instrumented once for both):
#      unit, api, stress, fuzz (corpus replay) and net suites (with replay-cluster-zmq:
#      kvreg-replay --transport zmq against inproc); kvreg-replay's input, gzip, sweep and chart
#      cases; the Python binding's tests on the ASan library.
#   2. TSan build: the concurrency tests (stress modes, callback_race, swap_race, stale_reuse, misuse_events,
#      clear_snapshot, index_race, shard_lock, index queries against writers, index dump and
#      partitions), kvreg-replay --sweep (two worker threads), the net tests (the publisher's
#      sender thread against its users, the subscriber under attack; libzmq's own hand-overs
#      suppressed) and the NATS tests (replicas, snapshots, liveness, kill cycles).
#   3. valgrind memcheck (meson test --setup valgrind) on the main build: unit, api, fuzz, stress.
#   4. libFuzzer, in build 1, two targets at a time: the registry model (fuzz_kvh.c) for 20 s from
#      the checked-in corpus beside the wire decoders' target (fuzz_wire.c) for 14 s from
#      tests/fuzz/corpus_wire; then the index's (fuzz_index.c, garbage decoded events) beside
#      fuzz_index_load.c (mutated dumps), for a third of the first budget each; then the NATS
#      snapshot body (fuzz_snapshot.cpp) for as long.
# Without clang, build 1 is made with the default compiler and step 4 is skipped (said so).
# Env: KVREG_FUZZ_SECONDS (default 20), KVREG_FUZZ_WIRE_SECONDS (default 14). Bindings, examples
# and bench are left to the main run, except the Python binding's 0.3 tests, which also run
# against the ASan library.
# Usage: sanitizers.sh [all|build|test]: `build` configures and compiles the two sanitizer
# builds only, `test` runs the passes on what `build` made, `all` (the default) does both.
# .ci/run starts `build` early, at idle priority, so that the compiles use the CPU the main
# suites leave idle, and runs `test` after them.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
case "$mode" in all|build|test) ;; *) echo "usage: $0 [all|build|test]" >&2; exit 2 ;; esac
jobs=2
fuzz_seconds=${KVREG_FUZZ_SECONDS:-20}
fuzz_wire_seconds=${KVREG_FUZZ_WIRE_SECONDS:-14}
common=(-Dtests=enabled -Dexamples=false -Dbench=false -Dbindings_tests=disabled
        -Dnats=enabled --wrap-mode=nodownload)

section() { echo; echo "=== sanitizers.sh: $* ($(date +%T))"; }
# Every pass runs even when an earlier one failed, so one CI run reports all of them.
failed=()
run() { local name=$1; shift; if ! "$@"; then failed+=("$name"); echo "*** $name FAILED"; fi; }

# Any report is an error; keep going long enough to print it with a stack.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# libzmq is not instrumented: its internal hand-overs are suppressed (see the file).
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/net/tsan-libzmq.supp

have_clang=0
if command -v clang >/dev/null 2>&1 && command -v clang++ >/dev/null 2>&1; then have_clang=1; fi
if [ "$have_clang" = 1 ]; then
  asan_rt="$(clang -print-file-name=libclang_rt.asan-x86_64.so)"
else
  asan_rt="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
fi

build_sanitized() {
  rm -rf build-asan build-tsan build-fuzz # ours alone: always configured afresh
  section "building: ASan + UBSan (and the libFuzzer targets)"
  if [ "$have_clang" = 1 ]; then
    # -fsanitize=fuzzer-no-link on the whole build dir puts coverage into the library too
    CC=clang CXX=clang++ CFLAGS=-fsanitize=fuzzer-no-link CXXFLAGS=-fsanitize=fuzzer-no-link \
      meson setup build-asan "${common[@]}" -Db_sanitize=address,undefined -Db_lundef=false \
        -Dbuildtype=debugoptimized -Dexamples=true -Dfuzz=enabled
  else
    echo "SKIP: clang not found: ASan+UBSan with the default compiler, no libFuzzer run"
    meson setup build-asan "${common[@]}" -Db_sanitize=address,undefined -Db_lundef=false \
      -Dbuildtype=debugoptimized -Dexamples=true
  fi
  meson compile -C build-asan -j "$jobs"
  section "building: TSan"
  meson setup build-tsan "${common[@]}" -Db_sanitize=thread -Db_lundef=false -Dbuildtype=debugoptimized \
    -Dexamples=true
  meson compile -C build-tsan -j "$jobs" "${tsan_targets[@]}"
  section "built"
}

# What the TSan pass runs (and so builds)
tsan_targets=(tests/stress/kvreg-stress tests/stress/kvreg-misuse-events
  tests/stress/kvreg-callback-race tests/stress/kvreg-swap-race tests/stress/kvreg-stale-reuse tests/unit/test_delivery
  tests/stress/kvreg-clear-snapshot tests/unit/test_clear tests/unit/test_snapshot
  tools/replay/kvreg-replay tests/index/kvreg-index-race tests/net/test_net tests/net/test_net_malformed
  tests/stress/kvreg-shard-lock tests/stress/kvreg-prefetch-race tests/stress/kvreg-poll-queue-race
  tests/stress/kvreg-tier-race tests/unit/test_event_modes tests/index/test_index_route
  tests/net/test_net_order tests/net/test_net_restart tests/net/test_replay_flood
  tests/net/replay_flood_client tests/net/test_replay_limits tests/nats/test_nats
  tests/nats/test_nats_replica tests/index/test_index_dump tests/index/test_index_stats
  tests/index/test_index_partition tests/index/test_index_query_concurrent tests/net/test_net_attack
  tests/api/test_api_getters_net tests/api/test_api_getters_nats tests/net/test_pub_upstream
  tests/net/test_sub_frames tests/nats/test_nats_max_payload)

if [ "$mode" != test ]; then build_sanitized; fi
if [ "$mode" = build ]; then exit 0; fi
for b in build-asan build-tsan; do
  [ -f "$b/build.ninja" ] || { echo "sanitizers.sh: $b is not built: run '$0 build' first" >&2; exit 1; }
done

section "ASan + UBSan (and the libFuzzer targets)"
run "ASan+UBSan" env KVREG_STRESS_SECONDS=2 KVREG_MODEL_SEEDS=60 \
  meson test -C build-asan --print-errorlogs --suite unit --suite api --suite stress --suite fuzz \
  --suite net --suite nats --suite index --no-suite long --no-suite script
# kvreg-replay on bad, compressed and empty input, and the sweep's threads and chart (cairo)
replay_asan=(replay-malformed replay-skip-bad replay-gzip replay-empty replay-sweep replay-chart
            replay-timing replay-cluster-fair replay-cluster-compare replay-verify-per-tier
            events-stream-file events-dynamo-fields replay-cluster-sweep-workers)
# (replay-cluster-nats, -nats-checks and events-sub-nats ran above, in suite nats)
run "ASan+UBSan replay" meson test -C build-asan --print-errorlogs --no-rebuild "${replay_asan[@]}"
# The Python binding's 0.3 tests (media, clear, snapshots, wire: ctypes handing buffers to C)
# through the ASan library: pure Python, so nothing to build; LD_PRELOAD puts the sanitizer
# runtimes first, as the interpreter is not instrumented (its own leaks are not ours).
if command -v python3 >/dev/null 2>&1 && [ -e "${asan_rt%% *}" ]; then
  run "ASan+UBSan python-binding" env \
    LD_PRELOAD="$asan_rt" \
    ASAN_OPTIONS="${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0}" \
    KVREG_LIBRARY=build-asan/src/libkvreg.so.0 PYTHONPATH=bindings/python PYTHONDONTWRITEBYTECODE=1 \
    python3 -X dev -m unittest tests.test_wire tests.test_media_clear_snapshot
fi

section "TSan (concurrency tests)"
# --no-rebuild below: what build_sanitized compiled, nothing more
# The net attack tests run with a 1,000-topic peer (KVREG_NET_ATTACK_TOPICS): the default
# 50,000 outlast their deadline under TSan; the subscriber's thread hand-overs are the same.
run "TSan" env KVREG_STRESS_SECONDS=2 KVREG_NET_ATTACK_TOPICS=1000 \
  meson test -C build-tsan --print-errorlogs --no-rebuild \
  stress-inline stress-poll stress-poll2 callback_race swap_race stale_reuse misuse_events delivery \
  clear_snapshot-inline clear_snapshot-poll clear snapshot replay-sweep index_race net net-malformed \
  shard_lock prefetch_race poll_queue_race tier_race-global tier_race-per-tier event_modes \
  index_route net-order net-restart net-replay-flood net-replay-limits nats \
  index_dump index_stats index_partition index_query_concurrent \
  nats-liveness nats-liveness-stalled nats-liveness-cut nats-liveness-replica-frozen nats-liveness-server-stopped nats-liveness-bucket-ttl-shorter nats-snapshots nats-purge nats-orphans nats-kill-cycles nats-slow-consumer \
  net-attack-topics net-attack-topicsreplay net-attack-busy net-attack-foreign net-attack-rcvbytes \
  net-attack-heldcopy net-attack-heldpause net-attack-heldshared net-attack-heldfair net-attack-probehold \
  net-attack-malformed net-attack-malformedends net-attack-malformedoff net-pub-upstream net-sub-frames \
  api-getters-net api-getters-nats nats-stream-max-msg-size nats-stream-limit-lowered

section "valgrind memcheck"
if command -v valgrind >/dev/null 2>&1; then
  # valgrind runs threads one at a time and ~30x slower: shorter stress, fewer model seeds,
  # 300 requests of each trace for tier_consumers (past the GPU tier's capacity: offloads and
  # evictions; the ASan+UBSan run above replays 1,000)
  run "valgrind" env KVREG_STRESS_SECONDS=1 KVREG_MODEL_SEEDS=8 KVREG_TIER_REQUESTS=300 \
    meson test -C build --setup valgrind --print-errorlogs \
      --suite unit --suite api --suite fuzz --suite stress --no-suite long --no-suite script
else
  echo "SKIP: no valgrind test setup (valgrind not installed?)"
fi

section "libFuzzer (in the ASan+UBSan build)"
if [ "$have_clang" = 1 ]; then
  # fuzz NAME TARGET CORPUS SECONDS MAX_LEN: run a target from a copy of its checked-in corpus;
  # a crash or model mismatch leaves its input in artifacts/ (printed), replayable with the
  # matching build/tests/fuzz/kvreg-fuzz*-replay FILE. Each target is one thread: two run at
  # once (fuzz_start), each writing its report to its own directory, read back by fuzz_wait.
  fuzz_dirs=()
  fuzz_start() {
    local name=$1 target=$2 corpus=$3 seconds=$4 max_len=$5 work
    work=$(mktemp -d)
    cp "$corpus"/* "$work/"
    mkdir -p "$work/artifacts"
    echo "$name" >"$work/name"
    ( if "$target" -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=2048 \
          -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work" 2>"$work/fuzz.log"; then
        echo 0 >"$work/rc"
      else
        echo 1 >"$work/rc"
      fi ) &
    fuzz_dirs+=("$work")
  }
  fuzz_wait() {
    wait
    local work name
    for work in "${fuzz_dirs[@]}"; do
      name=$(cat "$work/name")
      if [ "$(cat "$work/rc" 2>/dev/null)" = 0 ]; then
        echo "$name:"; grep -E '^stat::(number_of_executed_units|peak_rss_mb)|^Done ' "$work/fuzz.log" || true
      else
        failed+=("$name")
        echo "*** $name FAILED"; tail -60 "$work/fuzz.log"
        for f in "$work"/artifacts/*; do
          [ -e "$f" ] || continue
          echo "fuzz artifact: $f"; od -An -tx1 "$f" | head -20
        done
      fi
      rm -rf "$work"
    done
    fuzz_dirs=()
  }
  # The registry model and the wire decoders (built when msgpack-c is found) ...
  fuzz_start libFuzzer build-asan/tests/fuzz/kvreg-fuzz tests/fuzz/corpus "$fuzz_seconds" 1024
  if [ -x build-asan/tests/fuzz/kvreg-fuzz-wire ]; then
    fuzz_start libFuzzer-wire build-asan/tests/fuzz/kvreg-fuzz-wire tests/fuzz/corpus_wire \
      "$fuzz_wire_seconds" 65536
  else
    echo "SKIP: kvreg-fuzz-wire not built (no msgpack-c?)"
  fi
  fuzz_wait
  # ... then the index's events, and kvreg_index_load on mutated dumps (fuzz_index_load.c),
  # from sealed and unsealed dumps.
  fuzz_start libFuzzer-index build-asan/tests/fuzz/kvreg-fuzz-index tests/fuzz/corpus_index \
    "$((fuzz_seconds / 3 + 1))" 2048
  fuzz_start libFuzzer-index-load build-asan/tests/fuzz/kvreg-fuzz-index-load tests/fuzz/corpus_index_load \
    "$((fuzz_seconds / 3 + 1))" 65536
  fuzz_wait
  # ... then a NATS replica's snapshot body read in pieces (fuzz_snapshot.cpp; built with NATS).
  if [ -x build-asan/tests/fuzz/kvreg-fuzz-snapshot ]; then
    fuzz_start libFuzzer-snapshot build-asan/tests/fuzz/kvreg-fuzz-snapshot tests/fuzz/corpus_snapshot \
      "$((fuzz_seconds / 3 + 1))" 8192
    fuzz_wait
  else
    echo "SKIP: kvreg-fuzz-snapshot not built (no libnats?)"
  fi
else
  echo "SKIP: clang not found, no libFuzzer run (said above)"
fi
section "done"
if [ ${#failed[@]} -gt 0 ]; then
  echo "sanitizers.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "sanitizers.sh: all passes clean"
