#!/usr/bin/python3
"""Where each of a load's threads spent a window of its run, from `perf script -F
comm,tid,time,ip,sym,dso -G` output (gzipped; scripts/gpu_session.sh perfstart22): the share of
each symbol in the samples of gpubatch-load (the callers), gpubatch-strand and gpubatch-done, over
the first 15 ms after the timed executor's strand first ran and over 200-600 ms.
Usage: bench/perf_windows.py perf-script.txt.gz"""
import sys,re,gzip
from collections import defaultdict, Counter
rows=[]
pat=re.compile(r'^\s*(.*?)\s+(\d+)\s+(\d+\.\d+):\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$')
for l in gzip.open(sys.argv[1],'rt'):
    m=pat.match(l)
    if not m: continue
    rows.append((float(m.group(3)),m.group(1),int(m.group(2)),m.group(5),m.group(6).split('/')[-1]))
strand=[r for r in rows if r[1]=='gpubatch-strand']
tids=sorted(set(r[2] for r in strand))
t0=min(r[0] for r in strand if r[2]==tids[-1])
def prof(a,b,comm):
    c=Counter()
    n=0
    for t,cm,tid,sym,dso in rows:
        if t0+a<=t<t0+b and cm==comm:
            c[sym if sym!='[unknown]' else dso]+=1; n+=1
    print(f'== {comm} {a*1000:.0f}-{b*1000:.0f} ms: {n} samples')
    for s,k in c.most_common(14): print(f'   {100*k/n:5.1f}% {s}')
for comm in ('gpubatch-load','gpubatch-strand','gpubatch-done'):
    prof(0,0.015,comm); prof(0.2,0.6,comm)
