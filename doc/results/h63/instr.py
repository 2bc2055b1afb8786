#!/usr/bin/env python3
# instr.py CALLGRIND_OUT BIN FUNC_SUBSTR [PER]: per-instruction Ir of one function (callgrind --dump-instr=yes
# --compress-pos=no --compress-strings=no), joined with objdump, divided by PER.
import re, subprocess, sys
out, binp, fsub = sys.argv[1], sys.argv[2], sys.argv[3]
per = float(sys.argv[4]) if len(sys.argv) > 4 else 1e6
cost = {}
cur = None
for line in open(out):
    if line.startswith('fn='):
        cur = fsub in line
        continue
    if line.startswith(('cfn=', 'cfi=', 'cob=', 'calls=')):
        if line.startswith('calls='): skip_next = True
        continue
    if cur and re.match(r'^0x[0-9a-f]+ ', line):
        parts = line.split()
        a = int(parts[0], 16)
        if 'skip_next' in globals() and skip_next:
            skip_next = False  # inclusive cost line of a call
            continue
        cost[a] = cost.get(a, 0) + int(parts[-1])
    elif 'skip_next' in globals() and skip_next and re.match(r'^0x', line):
        skip_next = False
if not cost: sys.exit('no costs')
lo, hi = min(cost), max(cost) + 16
dis = subprocess.run(['objdump', '-d', '--no-show-raw-insn', f'--start-address={lo}', f'--stop-address={hi}', binp],
                     capture_output=True, text=True).stdout
tot = 0
for l in dis.splitlines():
    m = re.match(r'\s*([0-9a-f]+):\s*(.*)', l)
    if not m: continue
    a = int(m.group(1), 16)
    c = cost.get(a, 0) / per
    tot += c
    if c >= 0.01:
        ins = re.sub(r'<[^>]*>', '', m.group(2))[:60]
        print(f'{c:6.2f} {a:x} {ins}')
print(f'total {tot:.1f}')
