# The deadline and priority rows of gpubatch-mix results (a results.jsonl of scripts/gpu_session.sh):
# python3 bench/mix_rows.py FILE
import json,sys
for l in open(sys.argv[1]):
    j=json.loads(l)
    if j.get('tool')!='gpubatch-mix': continue
    none={'count':0,'p99':0.0}
    bp={k:none for k in ('watch','admission','strand','call','strand_unwatched','strand_watch_behind','at_call')}
    bp.update(j.get('deadline_late_by_path_us',{}))  # absent before the tenth session
    print(j['name'].ljust(12), 'ok/s %8.0f'%j['completed_per_s'],'dl %7d'%j['deadline_exceeded'],'shed %7d'%j.get('shed',0),
      'late p50/p99 %6.0f/%6.0f'%(j['deadline_late_us']['p50'],j['deadline_late_us']['p99']),
      'watch %7d/%6.0f'%(bp['watch']['count'],bp['watch']['p99']), 'adm %7d/%6.0f'%(bp['admission']['count'],bp['admission']['p99']),
      'strand %6d/%6.0f'%(bp['strand']['count'],bp['strand']['p99']),
      'unw %5d/%6.0f'%(bp['strand_unwatched']['count'],bp['strand_unwatched']['p99']),
      'behind %5d/%6.0f'%(bp['strand_watch_behind']['count'],bp['strand_watch_behind']['p99']),
      'atcall %5d/%6.0f'%(bp['at_call']['count'],bp['at_call']['p99']),
      'small %7.0f/%8.0f'%(j['latency_us']['small']['p50'],j['latency_us']['small']['p99']),
      'e2e %6.0f'%j['executor_e2e_p99_us']['0'],
      'q99 '+'/'.join('%.0f'%q['p99'] for q in j.get('latency_by_quarter_us', [])),  # since 2026-11-29
      'expr %d'%j.get('express_batches', 0),'probe %5.0f'%j['host'].get('probe_late_p99_us',0),'v',j['verified'])
