# The priority rows of gpubatch-mix results (a results.jsonl of scripts/gpu_session.sh): served/s,
# the high level's p50/p99 from the scheduled send, its call-to-handler p50/p99 and its senders'
# lag p99, the low level's p50, the executor's own level-1 p99. python3 bench/prio_rows.py FILE
import json, sys

for line in open(sys.argv[1]):
    j = json.loads(line)
    if j.get('tool') != 'gpubatch-mix' or 'high' not in j.get('from_call_us', {}):
        continue
    lat, call, lag = j['latency_us'], j['from_call_us'], j['send_lag_us']
    if lat['high']['p50'] == 0 and lat['high']['p99'] == 0:
        continue
    print(j['name'].ljust(18), 'ok/s %8.0f' % j['completed_per_s'],
          'high p50/p99 %6.0f/%7.0f' % (lat['high']['p50'], lat['high']['p99']),
          'call %5.0f/%6.0f' % (call['high']['p50'], call['high']['p99']),
          'lag99 %6.0f' % lag['high']['p99'], 'low p50 %7.0f' % lat['low']['p50'],
          'e2e1 %6.0f' % j['executor_e2e_p99_us'].get('1', 0), 'v', j['verified'])
