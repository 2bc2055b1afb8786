#!/bin/bash
# cg.sh BIN|libart TAG LL : callgrind with cache and branch simulation on the lookups only (1M sparse keys, seed 1)
# libart: /tmp/h67/pg/driver-libart-g = art.c + scripts/peers/driver.cc built -O3 -march=x86-64-v3 -g, on
# /tmp/h67/keys1m.bin (wort bench --keys-out: the same 1M sparse keys, seed 1, and lookup order)
B=$1; T=$2; LL=$3
if [ $B = libart ]; then
  valgrind --tool=callgrind --collect-atstart=no --toggle-collect=art_search --cache-sim=yes --branch-sim=yes --D1=32768,8,64 --LL=$LL --callgrind-out-file=/tmp/h67/cg-$T.out /tmp/h67/pg/driver-libart-g /tmp/h67/keys1m.bin > /tmp/h67/cg-$T.log 2>&1
else
  valgrind --tool=callgrind --collect-atstart=no '--toggle-collect=wort::vol::(anonymous namespace)::VArt::Lookup*' --cache-sim=yes --branch-sim=yes --D1=32768,8,64 --LL=$LL --callgrind-out-file=/tmp/h67/cg-$T.out $B bench --index vart --dist sparse --keys 1M --seed 1 --ops insert,search --flush clflush --pool /dev/shm/h67-cg-$T.pool > /tmp/h67/cg-$T.log 2>&1
  rm -f /dev/shm/h67-cg-$T.pool
fi
echo "$T $(grep Collected /tmp/h67/cg-$T.log)"
