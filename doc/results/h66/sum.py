import re,sys
for d in sys.argv[1:]:
    lines=open(d+'/ok-lines').read().splitlines()
    acked=sum(int(re.search(r'(\d+) writes acknowledged',l).group(1)) for l in lines)
    after=sum(int(re.search(r'(\d+) of them after',l).group(1)) for l in lines)
    mn=min(int(re.search(r'(\d+) of them after',l).group(1)) for l in lines)
    loads=[float(l.split()[-1]) for l in open(d+'/log')]
    print(d, 'runs with result line', len(lines), 'acked', acked, 'after stop/kill', after, 'min per run', mn, 'load min/median/max', min(loads), sorted(loads)[len(loads)//2], max(loads))
