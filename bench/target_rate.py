#!/usr/bin/env python3
"""The highest offered rate at which a latency target holds (issue 14: "p99 <= 500 us up to the
highest rate that allows it, and that rate reported").

    bench/target_rate.py --target-p99-us 500 --start 250000 --out bench/results/rate.jsonl
    bench/target_rate.py --bin ".gpu/run.sh gpubatch-mix" --extra "--device 0" ...   (GPU machine)
    bench/target_rate.py --replot bench/results/rate.jsonl --plot docs/img/target-rate.png

Runs `gpubatch-mix --target-p99-us T` open loop (256-float relu from --threads senders; every
result verified against the CPU reference) at rising offered rates, --factor apart from --start,
until a rate fails (or, when --start fails, falling by --factor until one holds), then halves the
gap (geometric mean) --refine times between the highest rate that held and the lowest that failed. A run holds when p99 <= T,
the executor served >= 95 % of what was offered, and every request succeeded, verified, none lost;
a rate holds when each of its --repeat runs does, or (--majority-of K) when most of up to K do.
With --beside, each rate also runs without a target (`target_p99_us` 0, the configuration's own
behaviour) right after the run with it: the side-by-side comparison. The search assumes that a
rate above one that failed fails too; the table shows every run, so a machine's noise is visible.
"""
import argparse
import json
import math
import shlex
import subprocess
import sys

SERVED_SHARE = 0.95  # below this share of the offered rate, the executor fell behind: not held


def held(record, target_us):
    """Whether one gpubatch-mix run (its --json object) held the target."""
    return (record.get("verified") is True and record.get("lost", 0) == 0
            and record.get("ok") == record.get("requests")  # no error of any kind
            and record["latency_us"]["all"]["p99"] <= target_us
            and record["completed_per_s"] >= SERVED_SHARE * record["offered_rate"])


def decide_rate(run_once, repeat=1, majority_of=1):
    """Whether a rate holds, from `run_once() -> bool` (one run held the target).

    With `repeat` N every one of N runs must hold (all N run, so that the table shows each). With
    `majority_of` K (odd) the rate holds when most of K runs do; runs stop once the verdict is
    known (two holds, or two failures, of three): one run's episode on a noisy machine neither
    ends the rise nor passes a rate that fails in most runs."""
    if repeat < 1 or majority_of < 1 or majority_of % 2 == 0 or (repeat > 1 and majority_of > 1):
        raise ValueError("need repeat >= 1, an odd majority_of >= 1, and not both above 1")
    if majority_of == 1:
        return all([run_once() for _ in range(repeat)])
    need = majority_of // 2 + 1
    good = bad = 0
    while good < need and bad < need:
        if run_once():
            good += 1
        else:
            bad += 1
    return good >= need


def search(holds, start, factor, max_rate, refine, min_rate=None):
    """The highest rate r in the probed set with holds(r), or None when none held.

    `holds(rate) -> bool` runs the measurement. Rates rise by `factor` from `start` (capped at
    `max_rate`) until one fails; when `start` itself fails they fall by `factor` instead, down to
    `min_rate` (default start / 64), until one holds. Then `refine` geometric bisections between
    the highest rate that held and the lowest that failed. Returns (best, probed), probed being
    the rates in the order they ran."""
    min_rate = start / 64 if min_rate is None else min_rate
    if not 0 < min_rate <= start <= max_rate or factor <= 1 or refine < 0:
        raise ValueError("need 0 < min_rate <= start <= max_rate, factor > 1, refine >= 0")
    probed, good, bad = [], None, None

    def probe(rate):
        probed.append(rate)
        return holds(rate)

    rate = float(start)
    if probe(rate):
        good = rate
        while bad is None and good < max_rate:
            rate = min(good * factor, float(max_rate))
            if probe(rate):
                good = rate
            else:
                bad = rate
    else:
        bad = rate
        while good is None and bad > min_rate:
            rate = max(bad / factor, float(min_rate))
            if probe(rate):
                good = rate
            else:
                bad = rate
    if good is None or bad is None:
        return good, probed
    for _ in range(refine):
        mid = math.sqrt(good * bad)
        if probe(mid):
            good = mid
        else:
            bad = mid
    return good, probed


def run_mix(binary, rate, a, target_us):
    args = ["--json", "--rate", f"{rate:.0f}", "--requests", str(max(1000, int(rate * a.seconds))),
            "--threads", str(a.threads), "--size", str(a.size), "--target-p99-us", str(target_us)]
    cmd = shlex.split(binary) + args + shlex.split(a.extra)
    print("+", " ".join(cmd), file=sys.stderr)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    lines = out.stdout.strip().splitlines()
    sys.stderr.write(out.stderr)  # its log, where a validation message would show
    if out.returncode != 0 or not lines or not lines[-1].startswith("{"):
        raise SystemExit(f"gpubatch-mix failed (exit {out.returncode}): {' '.join(cmd)}")
    r = json.loads(lines[-1])
    r["command"] = " ".join(cmd)
    return r


def row(r, target):
    l = r["latency_us"]["all"]
    tag = "held" if held(r, target) else "-"
    return (f"{r['offered_rate']:>11,.0f} {r['completed_per_s']:>11,.0f} {l['p50']:>8.0f} {l['p99']:>8.0f} "
            f"{r['target_p99_us']:>7} {tag:>5}")


def report(records, target, best, plot_path):
    print(f"{'offered/s':>11} {'served/s':>11} {'p50 us':>8} {'p99 us':>8} {'target':>7} {'':>5}")
    for r in records:
        print(row(r, target))
    if best is None:
        print(f"no rate held p99 <= {target} us (down to the lowest tried)")
    else:
        at = [r for r in records if abs(r["offered_rate"] - best) <= 1 and r["target_p99_us"] == target]
        p99 = max(r["latency_us"]["all"]["p99"] for r in at)
        print(f"highest rate holding p99 <= {target} us: {best:,.0f} requests/s offered (p99 {p99:.0f} us)")
    if plot_path:
        plot(records, target, best, plot_path)


def plot(records, target, best, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for t, style, name in ((target, "o", f"target_p99_us {target}"), (0, "s", "no target")):
        pts = sorted((r["offered_rate"], r["latency_us"]["all"]["p99"]) for r in records if r["target_p99_us"] == t)
        if pts:
            ax.plot([x for x, _ in pts], [y for _, y in pts], style + "-", label=f"p99, {name}")
    ax.axhline(target, color="gray", lw=0.8, label=f"{target} us")
    if best is not None:
        ax.axvline(best, color="green", lw=0.8, ls="--", label=f"highest rate held: {best:,.0f}/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("offered requests/s")
    ax.set_ylabel("p99 latency, microseconds")
    ax.set_title(f"gpubatch-mix, target_p99_us {target}, on {records[0]['device']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print("wrote", path)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default="build/release/bench/gpubatch-mix", help="the binary, or a command that runs it")
    p.add_argument("--target-p99-us", type=int, default=500)
    p.add_argument("--start", type=float, default=250000, help="the first offered rate, requests/s")
    p.add_argument("--max-rate", type=float, default=16e6)
    p.add_argument("--min-rate", type=float, help="the lowest rate tried when --start fails (default start / 64)")
    p.add_argument("--factor", type=float, default=1.5)
    p.add_argument("--refine", type=int, default=3, help="bisections after the first failing rate")
    p.add_argument("--repeat", type=int, default=1, help="runs a rate; it holds only if every run does")
    p.add_argument("--majority-of", type=int, default=1,
                   help="K (odd): a rate holds when most of up to K runs do (stops once decided)")
    p.add_argument("--beside", action="store_true", help="also run each rate without a target")
    p.add_argument("--seconds", type=float, default=2.0, help="offered seconds of each run")
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--extra", default="", help="more gpubatch-mix flags")
    p.add_argument("--out", help="JSON lines: every run, then a summary line")
    p.add_argument("--plot")
    p.add_argument("--replot", help="report (and plot) the runs and summary of a results file instead")
    a = p.parse_args()
    target = a.target_p99_us
    if a.replot:
        lines = [json.loads(x) for x in open(a.replot)]
        records = [r for r in lines if r.get("tool") == "gpubatch-mix"]
        summary = [r for r in lines if r.get("summary") == "target_rate"]
        report(records, target, summary[-1]["highest_rate"] if summary else None, a.plot)
        return
    records = []

    def keep(r):
        records.append(r)
        if a.out:
            with open(a.out, "a") as f:
                f.write(json.dumps(r) + "\n")

    def run_once(rate):
        r = run_mix(a.bin, rate, a, target)
        keep(r)
        if a.beside:
            keep(run_mix(a.bin, rate, a, 0))
        return held(r, target)

    def holds(rate):
        return decide_rate(lambda: run_once(rate), a.repeat, a.majority_of)

    try:  # bad --repeat / --majority-of: refused before any run
        decide_rate(lambda: True, a.repeat, a.majority_of)
    except ValueError as e:
        p.error(str(e))

    best, probed = search(holds, a.start, a.factor, a.max_rate, a.refine, a.min_rate)
    best = None if best is None else round(best)
    if a.out:
        with open(a.out, "a") as f:
            f.write(json.dumps({"summary": "target_rate", "target_p99_us": target, "highest_rate": best,
                                "probed": [round(x) for x in probed], "repeat": a.repeat,
                                "majority_of": a.majority_of}) + "\n")
    report(records, target, best, a.plot)


if __name__ == "__main__":
    main()
