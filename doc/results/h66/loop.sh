#!/bin/bash
# usage: loop.sh BIN N [ROUNDS]  - runs the kill test N times; on a hang (>60 s) dumps stacks
BIN=$1; N=$2; R=${3:-}
out=/tmp/h66/loop-$$; mkdir -p $out
hangs=0; pass=0; fail=0
for i in $(seq 1 $N); do
  if [ -n "$R" ]; then export WORT_CANRT_KILL_ROUNDS=$R; fi
  $BIN --gtest_filter='CanrtKill.*' > $out/run.txt 2>&1 &
  echo "$(date +%T) run $i start load $(cut -d' ' -f1 /proc/loadavg)" >> $out/log
  pid=$!
  t=0
  while kill -0 $pid 2>/dev/null && [ $t -lt 120 ]; do sleep 1; t=$((t+1)); done
  if kill -0 $pid 2>/dev/null; then
    hangs=$((hangs+1))
    echo "HANG run $i pid $pid" | tee -a $out/summary
    ss -xp 2>/dev/null | grep -E "pid=($pid|$(pgrep -P $pid | tr '\n' '|' | sed 's/|$//'))," >> $out/hang-$i.txt
    for p in $pid $(pgrep -P $pid); do
      echo "=== pid $p $(cat /proc/$p/status | grep State)" >> $out/hang-$i.txt
      gdb -p $p -batch -ex 'thread apply all bt' >> $out/hang-$i.txt 2>&1
    done
    cp $out/run.txt $out/hang-$i-run.txt
    for p in $(pgrep -P $pid); do kill -9 $p; done
    kill -9 $pid
    wait $pid
  else
    wait $pid; rc=$?
    grep "canrt kill test:" $out/run.txt >> $out/ok-lines
    if [ $rc = 0 ]; then pass=$((pass+1)); else fail=$((fail+1)); cp $out/run.txt $out/fail-$i.txt; fi
  fi
  echo "run $i t=$t pass=$pass fail=$fail hangs=$hangs" > $out/progress
done
echo "DONE pass=$pass fail=$fail hangs=$hangs" | tee -a $out/summary
