#!/bin/bash
# cgl.sh BIN KIND [KEYS] : instructions per Lookup (callgrind toggle on the kind's Lookup), and the harness (the search loop less Lookup)
BIN=$1; K=$2; N=${3:-1M}
case $K in
  wort) T='wort::radix::(anonymous namespace)::WortTree<4u>::Lookup*' ;;
  vart) T='wort::vol::(anonymous namespace)::VArt::Lookup*' ;;
  woart) T='wort::art::ArtTree::Lookup*' ;;
esac
tag=$(basename $(dirname $BIN))-$K
valgrind --tool=callgrind --collect-atstart=no "--toggle-collect=$T" --dump-instr=yes --callgrind-out-file=/tmp/h63/cg-$tag.out $BIN bench --index $K --dist sparse --keys $N --seed 1 --ops insert,search --flush clflush --pool /dev/shm/h63-cg-$$.pool >/dev/null 2>/tmp/h63/cg-$tag.err
rm -f /dev/shm/h63-cg-$$.pool
c=$(grep Collected /tmp/h63/cg-$tag.err | awk '{print $4}')
echo "$K $BIN lookup instructions: $c"
