#!/usr/bin/python3
"""The commonest call stacks of one command's samples in `perf script` output (plain or gzipped):
the kernel's way in (the outermost kernel frame below the syscall entry: `__x64_sys_futex`,
`asm_exc_page_fault`), then the innermost user-space frames that name a symbol. With `perf record
-e cs --call-graph fp`: where a load's threads go to sleep (scripts/gpu_session.sh dlprof25c).
Usage: bench/perf_stacks.py perf-script.txt[.gz] COMM [DEPTH=8] [TOP=25]
(COMM '*': every command, each stack led by its command.)"""
import gzip
import sys
from collections import Counter


ENTRY = {'entry_SYSCALL_64_after_hwframe', 'do_syscall_64', 'x64_sys_call'}


def samples(path):
    """Yields (comm, [kernel way in, user frame symbols innermost first]) per sample of `perf
    script`'s default output."""
    opener = gzip.open if path.endswith('.gz') else open
    comm, kernel, frames = None, [], []

    def sample():
        way = [k for k in kernel if k not in ENTRY]
        return comm, ([way[-1]] if way else []) + frames

    with opener(path, 'rt', errors='replace') as f:
        for line in f:
            if not line.strip():
                if comm is not None:
                    yield sample()
                comm, kernel, frames = None, [], []
            elif not line[0].isspace():
                comm = line.split()[0] if comm is None else comm
            else:
                parts = line.split(None, 1)
                sym = parts[1].rsplit(' (', 1)[0].split('+0x')[0] if len(parts) > 1 else '?'
                if '[kernel.kallsyms]' in line:
                    kernel.append(sym)
                elif sym != '[unknown]':
                    frames.append(sym)
    if comm is not None:
        yield sample()


def main():
    path, comm = sys.argv[1], sys.argv[2]
    depth = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 25
    stacks, total = Counter(), 0
    for c, frames in samples(path):
        if comm != '*' and c != comm:
            continue
        total += 1
        stacks[(c + ': ' if comm == '*' else '') + ' <- '.join(f[:90] for f in frames[:depth])] += 1
    print(f'{total} samples of {comm}')
    for s, n in stacks.most_common(top):
        print(f'{100 * n / max(total, 1):5.1f}% {n:8d}  {s}')


if __name__ == '__main__':
    main()
