#!/usr/bin/python3
"""Reads gpubatch-load JSON lines on stdin (the first row the unbatched baseline) and prints them
side by side. Exits 1 unless every run verified every result and lost none."""
import json
import sys

rows = [json.loads(line) for line in sys.stdin if line.strip()]
first = rows[0]
print(f"device: {first['device']}   op: {first['op']}, {first['size']} per request\n")
print(f"{'mode':<11}{'threads':>8}{'inflight':>9}{'requests/s':>13}{'x unbatched':>12}"
      f"{'p50 us':>10}{'p99 us':>10}{'mean batch':>11}  verified")
base = first["throughput_rps"]
for r in rows:
    lat = r["latency_us"]
    print(f"{r['preset']:<11}{r['threads']:>8}{r['inflight']:>9}{r['throughput_rps']:>13,.0f}"
          f"{r['throughput_rps'] / base:>12.1f}{lat['p50']:>10.0f}{lat['p99']:>10.0f}"
          f"{r['mean_batch_size']:>11.1f}  {r['verified']} (lost {r['lost']})")
sys.exit(0 if all(r["verified"] and r["lost"] == 0 for r in rows) else 1)
