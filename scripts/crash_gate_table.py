#!/usr/bin/env python3
"""The crash-testing gates' figures per index kind, as a Markdown table (doc/crash-model.md).

Runs `wort crashtest --index all --coverage --mutate --mutate-budget B` (or reads its saved
output with --from FILE) and prints, per kind: gated persist sites it owns, sites its plan met,
mutants caught / redundant / missed / skipped (time budget), and the wall time of its run.

Usage: crash_gate_table.py --wort build/wort [--budget 60] [--from saved-output.txt]
"""
import argparse
import re
import subprocess
import sys
import time

COV = re.compile(r'^(\S+): coverage (\d+)/(\d+) persist sites met .* ([\d.]+) s$')  # CLI or CoveragePlan test
UNREACHABLE = re.compile(r' (\d+) unreachable \(noted\)')
MUT = re.compile(r'^(\S+): mutation: (\d+) sites met, (\d+) caught, (\d+) redundant, (\d+) missed, (\d+) skipped \(time\), '
                 r'(\d+) missed and noted(?:.*; (\d+) of the caught only at return)?')
UNMET = re.compile(r'^  unmet: (\S+)')
DROP = re.compile(r'^  drop (\S+): (caught|redundant|MISSED|not met|skipped)')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--wort', default='build/wort')
    ap.add_argument('--budget', type=float, default=60)
    ap.add_argument('--from', dest='src')
    a = ap.parse_args()
    t0 = time.time()
    if a.src:
        text = open(a.src, encoding='utf-8').read()
        wall = None
    else:
        p = subprocess.run([a.wort, 'crashtest', '--index', 'all', '--coverage', '--mutate', '--mutate-budget',
                            str(a.budget)], capture_output=True, text=True)
        text = p.stdout + p.stderr
        wall = time.time() - t0
    rows = {}
    kind = None
    unmet_by = {}
    for line in text.splitlines():
        m = COV.match(line)
        if m:
            kind = m.group(1)
            u = UNREACHABLE.search(line)
            rows[kind] = {'met': int(m.group(2)), 'gated': int(m.group(3)), 's': float(m.group(4)), 'unmet': [],
                          'unreachable': int(u.group(1)) if u else 0}
            continue
        m = UNMET.match(line)
        if m and kind:
            rows[kind]['unmet'].append(m.group(1))
            unmet_by.setdefault(m.group(1), set()).add(kind)
            continue
        m = MUT.match(line)
        if m and m.group(1) in rows:
            r = rows[m.group(1)]
            r.update(caught=int(m.group(3)), redundant=int(m.group(4)), missed=int(m.group(5)), skipped=int(m.group(6)),
                     noted=int(m.group(7)), at_return=m.group(8) or '0')
    print('| kind | gated sites | met by its plan | unreachable (noted) | mutants caught | of which only at return | '
          'redundant | missed | missed, noted | skipped (time) | seconds |')
    print('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    for k, r in rows.items():
        print('| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0f} |'.format(
            k, r['gated'], r['met'], r['unreachable'], r.get('caught', '-'), r.get('at_return', '-'), r.get('redundant', '-'),
            r.get('missed', '-'), r.get('noted', '-'), r.get('skipped', '-'), r['s']))
    # A shared site (allocator, pool, common code) counts as met when any of its owner kinds meets
    # it (tests/crash/coverage_test.cc, CoverageGate.EverySiteMet, checks that union).
    print()
    print('Sites unmet by at least one of their owner kinds (met by another owner, or by none): ' +
          (', '.join(sorted(unmet_by)) or 'none'))
    if wall is not None:
        print('Wall time of the whole run: {:.0f} s'.format(wall))
    return 0


if __name__ == '__main__':
    sys.exit(main())
