#!/bin/bash
# h72 part 2: base (old growth rule) and new alternated; 4M load of wort, woart at 1 and 2 threads; 1M loads for space
out=/tmp/h72/p2
for r in 1 2 3; do
  for b in p2base final-all; do
    lab=base; [ $b = final-all ] && lab=new
    echo "round $r $lab 4M $(uptime)" >> $out/load.txt
    ./wort-$b bench ycsb --index wort,woart --keys 4M --ops 4M --workload load --request zipfian --threads 1,2 --flush clwb --json $out/$lab-default.jsonl > $out/$lab-4M-r$r.log 2>&1
    echo "round $r $lab 1M $(uptime)" >> $out/load.txt
    ./wort-$b bench ycsb --index wort,woart,cceh,fastfair --keys 1M --ops 1M --workload load --request zipfian --threads 1,2 --flush clwb --json $out/$lab-1M.jsonl > $out/$lab-1M-r$r.log 2>&1
  done
done
echo done > $out/done
