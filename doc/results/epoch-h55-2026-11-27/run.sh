#!/bin/bash
# The before/after runs of issue 31 (h55): 3 interleaved rounds of each binary, 1 and 2 threads.
# base = main at 7aa9712 (/tmp/h55-base-wort); v1 = the epoch changes (commits aa13d64, 186e386 and
# the bench's epoch figures); v2 = v1 + RetireAndCollect without the every-8 Collect.
out=${1:-.}
for round in 1 2 3; do
  for b in base v1s v2; do
    echo "== round $round binary $b load $(cut -d' ' -f1 /proc/loadavg)"
    /tmp/h55-$b-wort bench kv --op put --index woart --keys 500000 --ops 300000 --threads 1,2 2>&1
  done
done > $out/put-1-2-threads.txt
