#!/usr/bin/env python3
"""Open-loop sweeps of gpubatch-mix (scheduling, issue 14), with plots per class.

  bench/mix_sweep.py priority --rates 2000,8000,16000 --out bench/results/mix.jsonl --plot docs/img/mix-priority.png
  bench/mix_sweep.py deadline --rates 2000,8000 --deadline-us 2000 --out ... --plot ...
  bench/mix_sweep.py priority --bin ".gpu/run.sh gpubatch-mix" --extra "--device 0" ...  (GPU machine)
  bench/mix_sweep.py priority --replot bench/results/mix.jsonl --plot docs/img/mix-priority.png

`priority`: 10 % of requests at priority 1, the rest at 0; plots p50/p99 of each level against the
offered rate, beside the high level's p99 on an idle executor (the first, lowest rate).
`deadline`: 10 % large requests, every request with a deadline; plots how late deadline errors
arrived (p50/p99) and the small requests' p99 against the offered rate.
Every run verifies its results against the CPU reference (gpubatch-mix exits non-zero if not).
"""
import argparse
import json
import shlex
import subprocess
import sys


def run(binary, args):
    cmd = shlex.split(binary) + ["--json"] + args
    print("+", " ".join(cmd), file=sys.stderr)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
    line = out.stdout.strip().splitlines()[-1]
    result = json.loads(line)
    result["command"] = " ".join(cmd)
    return result


def plot(results, scenario, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rates = [r["offered_rate"] for r in results]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if scenario == "priority":
        for cls, style in (("high", "o-"), ("low", "s--")):
            ax.plot(rates, [r["latency_us"][cls]["p99"] for r in results], style, label=f"priority {1 if cls == 'high' else 0} p99")
            ax.plot(rates, [r["latency_us"][cls]["p50"] for r in results], style, alpha=0.4, label=f"priority {1 if cls == 'high' else 0} p50")
        ax.axhline(2 * results[0]["latency_us"]["high"]["p99"], color="gray", lw=0.8, label="2x high p99 at the lowest rate")
    else:
        ax.plot(rates, [r["deadline_late_us"]["p99"] for r in results], "o-", label="deadline error, late by (p99)")
        ax.plot(rates, [r["deadline_late_us"]["p50"] for r in results], "o--", label="deadline error, late by (p50)")
        ax.plot(rates, [r["latency_us"]["small"]["p99"] for r in results], "s-", label="small requests p99")
    ax.set_xlabel("offered requests/s")
    ax.set_ylabel("microseconds")
    ax.set_yscale("log")
    ax.set_title(f"gpubatch-mix {scenario} on {results[0]['device']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("scenario", choices=["priority", "deadline"])
    p.add_argument("--bin", default="build/release/bench/gpubatch-mix", help="the binary, or a command that runs it")
    p.add_argument("--rates", help="comma-separated offered rates, lowest first")
    p.add_argument("--replot", help="plot (and tabulate) the runs of this scenario in a results file instead")
    p.add_argument("--seconds", type=float, default=2.0, help="length of each run")
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--deadline-us", type=int, default=2000)
    p.add_argument("--large-size", type=int, default=1000000)
    p.add_argument("--extra", default="", help="more gpubatch-mix flags")
    p.add_argument("--out")
    p.add_argument("--plot")
    a = p.parse_args()
    if a.replot:
        results = [r for r in map(json.loads, open(a.replot)) if r.get("scenario") == a.scenario]
        report(results, a.scenario, a.plot)
        return
    if not a.rates or not a.out:
        p.error("--rates and --out are needed to run a sweep")
    results = []
    for rate in [float(x) for x in a.rates.split(",")]:
        args = ["--rate", str(rate), "--requests", str(max(1000, int(rate * a.seconds))), "--threads", str(a.threads)]
        if a.scenario == "priority":
            args += ["--high", "0.1"]
        else:
            args += ["--large", "0.1", "--large-size", str(a.large_size), "--deadline-us", str(a.deadline_us)]
        args += a.extra.split()
        r = run(a.bin, args)
        r["scenario"] = a.scenario
        results.append(r)
        with open(a.out, "a") as f:
            f.write(json.dumps(r) + "\n")
    report(results, a.scenario, a.plot)


def report(results, scenario, plot_path):
    print(f"{'offered':>9} {'ok/s':>9} {'hi p50':>8} {'hi p99':>8} {'lo p99':>8} {'small p99':>9} {'late p99':>9} {'verified':>8}")
    for r in results:
        l = r["latency_us"]
        print(f"{r['offered_rate']:>9.0f} {r['completed_per_s']:>9.0f} {l['high']['p50']:>8.0f} {l['high']['p99']:>8.0f} "
              f"{l['low']['p99']:>8.0f} {l['small']['p99']:>9.0f} {r['deadline_late_us']['p99']:>9.0f} {str(r['verified']):>8}")
    if plot_path:
        plot(results, scenario, plot_path)


if __name__ == "__main__":
    main()
