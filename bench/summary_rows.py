import json,os,sys
for l in open(sys.argv[1]):
    r=json.loads(l)
    if r.get('probe')=='stall':
        print(r['name'], r['late_us']); continue
    a=r['latency_us']['all'] if r.get('tool')=='gpubatch-mix' else r['latency_us']
    rate=r.get('completed_per_s', r.get('throughput_rps'))
    print(f"{r['name']:30s} {rate:10.0f} p50 {a['p50']:8.1f} p99 {a['p99']:9.1f} max {a['max']:9.1f} b {r.get('mean_batch_size',0):6.1f} {r['verified']}")
