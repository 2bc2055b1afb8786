set -u
export PATH=$PWD/.gpudeps/mc/bin:$PATH
export LD_LIBRARY_PATH=$PWD/.gpudeps/mc/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
memcached -V || exit 3
S=$OUT/sd; OUT=$S bash scripts/scaling_device.sh -- --keys 1000 --ops 1000 --threads 1 --kinds woart --workloads load > $S.txt 2>&1 || { tail -5 $S.txt; exit 4; }
for T in 1 4; do
  C=32
  MIXES="90 50" VALUE_SIZES=100 THREAD_COUNTS=$T KINDS=woart REQUESTS=300000 KEYSPACE=100000 CONNS=$C SERVER_CPUS=0-$((T-1)) CLIENT_CPUS=$T-15 timeout 70 bash scripts/bench_server.sh build-scaling > $OUT/serve-t$T.txt 2>&1
  tail -8 $OUT/serve-t$T.txt
done
