#!/usr/bin/env python3
"""Per-script throughput and latency from pgbench -l logs (scripts/bench-load.sh).

    bench-load-report.py DIR SCRIPT_NAME...

Reads DIR/many.* (pgbench's per-transaction logs: client, transaction,
latency in microseconds, script number, epoch seconds, microseconds) and
prints one row per script, and one for them all: transactions, transactions per
second, p50, p99.
"""
import glob
import sys


def percentile(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    k = min(len(values) - 1, max(0, int(round(p / 100.0 * (len(values) - 1)))))
    return values[k]


def main():
    out, names = sys.argv[1], sys.argv[2:]
    latencies = {i: [] for i in range(len(names))}
    first, last = None, None
    for path in glob.glob(f"{out}/many.*"):
        if path.endswith((".txt", ".rss")):
            continue
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 6:
                    continue
                script, latency = int(parts[3]), int(parts[2])
                when = int(parts[4]) + int(parts[5]) / 1e6
                first = when if first is None else min(first, when)
                last = when if last is None else max(last, when)
                latencies.setdefault(script, []).append(latency / 1000.0)
    span = (last - first) if first is not None and last > first else float("nan")
    print(f"{'function (script)':<34} {'calls':>7} {'calls/s':>9} {'p50 ms':>9} {'p99 ms':>9}")
    every = []
    for i, name in enumerate(names):
        v = latencies.get(i, [])
        every += v
        print(f"{name:<34} {len(v):>7} {len(v) / span:>9.1f} {percentile(v, 50):>9.2f} {percentile(v, 99):>9.2f}")
    print(f"{'all':<34} {len(every):>7} {len(every) / span:>9.1f} {percentile(every, 50):>9.2f} "
          f"{percentile(every, 99):>9.2f}")


if __name__ == "__main__":
    main()
