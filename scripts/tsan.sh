#!/usr/bin/env bash
# ThreadSanitizer run of the concurrency stress tests (.ci/run runs it; about 10 minutes): builds
# only the test binaries below with -DWORT_TSAN=ON in their own build directory (build-tsan)
# and runs their multi-threaded tests (sizes divided by 8 under TSan, see each test). Any TSan
# report fails the run (halt_on_error, non-zero exit). No suppressions: the optimistic readers'
# plain loads sit in functions marked WORT_OPTIMISTIC_READ (src/sync/version_lock.h says why
# that is sound); every other shared word is an atomic. Exits non-zero on any failure or report.
set -euo pipefail
cd "$(dirname "$0")/.."
TSAN_DIR=${WORT_TSAN_BUILD_DIR:-build-tsan}
WERROR=OFF
[ "${WORT_WERROR:-0}" = 1 ] && WERROR=ON  # .ci/run: warnings are errors
cmake -S . -B "$TSAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWORT_TSAN=ON -DWORT_WERROR="$WERROR" >/dev/null
cmake --build "$TSAN_DIR" -j"$(nproc)" --target test_sync test_concurrent test_fastfair_concurrent test_cceh test_alloc_race \
  test_alloc_stress test_multiwriter_kill test_store_stress test_kv_stress test_kv_batch test_transport test_canrt test_reply_kv \
  test_knn test_roart test_kv_shared test_arrival test_vart_arena
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1"
run() {
  echo "== tsan: $*"
  "$TSAN_DIR/$@"
}
run test_sync
# the open-loop harness of `wort bench arrival`: workers sharing a schedule and each hash kind
run test_arrival --gtest_filter='Arrival.EveryHashKindAtLinpsRate'
run test_concurrent
# vart's node allocator (issue 31): writers sharing nodes that grow and merge, nodes retired by
# other threads than their allocators' back into the retiring thread's cache, readers beside.
run test_vart_arena
# fastfair (issue 31): writers splitting the same leaves and parents under node locks.
run test_fastfair_concurrent
run test_alloc_race
# The allocator under concurrent allocation, free and pool growth (growth outside its lock), and
# writers allocating while one of them grows the pool ahead (h70).
run test_alloc_stress
run test_multiwriter_kill
run test_store_stress
# The key-value store API (wort/kv.h): racing writers of one key, lock-free readers, Close.
run test_kv_stress
# Batches beside readers (all or nothing) and beside Puts of the same keys.
run test_kv_batch --gtest_filter='KvBatch.ConcurrentReadersSeeWholeBatches:KvBatch.BatchesBesidePutsOfTheSameKeys'
run test_knn --gtest_filter='KnnConcurrent.*'
# Readers in other processes (issue 33): the hand-off between a write without lanes and a reader
# registering (the writer's hand-off thread and write epoch; the reader in another thread).
run test_kv_shared --gtest_filter='KvShared.ReaderRegisteringBesideAWriteWithoutLanesWaitsForIt'
# A retired value block is not reused while a reader holds it (issue 31: blocks held for readers
# per writer thread, tagged per batch): readers in threads of the writing process (and a process).
run test_kv_shared --gtest_filter='KvShared.RetiredBlockIsNotReusedWhileAReaderHoldsIt'
# roart (issue 34): leaf arrays growing 8 -> 24 -> 64 and splitting beside lookups and scans;
# inline keys (format 3) inserted, upserted and removed beside version-free lookups and scans.
run test_roart --gtest_filter='RoartConcurrent.*:RoartRegress.ConcurrentInsertsOfOneKeyExactlyOneWins'
# cceh: the tests with several threads (the others are single-threaded).
# h72: updates (segment lock, no version word) of hot keys beside readers and splits; an update
# waiting for a split of its segment; a lookup beside an update's persist.
run test_cceh --gtest_filter='*TwoThreads*:*ReaderBesideSplittingWriter*:*StressRacingInsertsAndReaders*:*VisitBesideWriters*:*ManyWritersSplitAndDoubleConcurrently*:*HotKeyUpdatesBesideReadersAndSplits*:*UpdateWaitsForASplitOfItsSegment*:*LookupDoesNotWaitForAnUpdatesPersist*'
# remote (issue 18): the transport, the request/reply baselines and CANRT on the local backend
# (the ucx backend is not built under TSan, see WORT_UCX in CMakeLists.txt): client threads'
# atomics and Reads beside the server's notify, write, resize and polling threads.
run test_transport --gtest_filter='*/local:TransportErrors.*:TransportLocal.*'
# The request/reply baselines (the server's polling thread beside client threads) and CANRT's
# concurrent tests (client threads beside the notify, write and resize threads; readers during a
# resize). The server-side copies of words that clients touch concurrently are relaxed atomics
# (remote/transport.h CopyFromRegion / CopyToRegion), so these run with no suppression.
run test_reply_kv --gtest_filter='*/local_*:ReplyKvLimits.*'
run test_canrt --gtest_filter='CanrtLease.*:Canrt.DifferentialAgainstMapFullByteRange:Canrt.RecoveryReappliesItemsOfLockedNodes:Canrt.ReadersDuringResize:Canrt.ReadersNeverSeeOlderThanAcknowledged:Canrt.AcknowledgedWriteIsVisibleBeforeTheServerApplies:Canrt.SequentialWritersShareNodesWithoutWaiting:Canrt.LockWordCarriesThePendingSetThroughApplies:Canrt.OneClientWritesOneNodeWhileTheApplyRuns:Canrt.SweepAppliesABatchWhosePostNeverCame:*ConcurrentClients/local:Canrt.ResizeRequestGoesToTheAwakeApplyThreadWithoutANotification:Canrt.PostedResizeRequestNotTakenIsTakenBackAndNotified:Canrt.NoWriteIntoANewNodeIsAcknowledgedBeforeTheCommitIsDurable'
echo "tsan: clean"
