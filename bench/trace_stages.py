"""The batches of a GPUBATCH_TRACE file (Chrome trace events, maybe .gz), shared by
trace_batches.py and trace_episodes.py: load_batches(path) -> {batch id: {"reason", "requests",
"submit": (begin, end), "gpu" (GPUBATCH_GPU_TIMESTAMPS=on, else None), and per stage of
STAGES but "submit" [begin, end]}}, times in us; complete(batch) says whether every stage is in."""
import gzip
import json
from collections import defaultdict

STAGES = ("formation", "submit", "device", "completion")


def load_events(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        return json.load(f)["traceEvents"]


def load_runs(path, events=None):
    events = load_events(path) if events is None else events
    return sorted((e["ts"], e["ts"] + e["dur"], e["args"]) for e in events
                  if e.get("ph") == "X" and e.get("name") == "strand run")


def load_batches(path, events=None):
    events = load_events(path) if events is None else events
    batches = defaultdict(dict)
    for e in events:
        if e.get("ph") == "X" and e.get("name") == "submit":
            a = e["args"]
            batches[a["batch"]].update(reason=a["reason"], requests=a["requests"], upper=a.get("upper", 0),
                                       submit=(e["ts"], e["ts"] + e["dur"]), gpu=a.get("gpu_us"))
        elif e.get("ph") in ("b", "e") and e.get("name") in ("formation", "device", "completion"):
            batches[e["id"]].setdefault(e["name"], [None, None])[0 if e["ph"] == "b" else 1] = e["ts"]
    return batches


def complete(batch):
    return "submit" in batch and all(s in batch and None not in batch[s] for s in STAGES)
