#!/usr/bin/env python3
"""Runs the kvg benchmarks and writes one self-contained HTML page of plots.

    scripts/bench-report.py --model A.gguf [--model B.gguf ...] --out report.html

For each model: `kvg bench --json` (prefill and decode tokens/s) and
`kvg bench-graft --json` (graft + 1 token vs recompute by prefix length, and
the file store against plain file I/O). The page has inline SVG only: no
script, no stylesheet or font from anywhere, so it opens offline and can be
archived as one file.

Layout is fixed (plot i at top 90 + 430 i px, left 20 px, 900 x 400) so that
tests/report/bench_report_test.sh can find the plots in a screenshot.
"""
import argparse
import html
import json
import math
import os
import subprocess
import sys

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]
WIDTH, HEIGHT = 900, 400
LEFT, RIGHT, TOP, BOTTOM = 70, 260, 40, 50  # plot margins; the legend sits on the right


def run_json(cmd):
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def nice_ticks(lo, hi, count=5):
    if hi <= lo:
        hi = lo + 1
    step = 10 ** math.floor(math.log10((hi - lo) / count))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= count:
            step *= m
            break
    ticks = [math.floor(lo / step) * step]
    while ticks[-1] < hi:  # the last tick at or above the largest value: nothing is drawn off the frame
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def fmt(v):
    return f"{v:g}" if abs(v) < 1e5 else f"{v:.3g}"


class Plot:
    """One SVG chart: title, axes with ticks, a legend; x linear or log2."""

    def __init__(self, title, x_label, y_label):
        self.title, self.x_label, self.y_label = title, x_label, y_label
        self.parts = []
        self.legend = []

    def frame(self, x_ticks, y_max, x_pos, x_text=fmt):
        pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
        self.y_ticks = nice_ticks(0, y_max)
        self.y_top = self.y_ticks[-1]
        self.sx = lambda x: LEFT + x_pos(x) * pw
        self.sy = lambda y: TOP + ph - (y / self.y_top) * ph
        p = self.parts
        p.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#888"/>')
        for t in self.y_ticks:
            y = self.sy(t)
            p.append(f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
            p.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{fmt(t)}</text>')
        for t in x_ticks:
            x = self.sx(t)
            p.append(f'<text x="{x:.1f}" y="{TOP + ph + 18}" text-anchor="middle">{html.escape(x_text(t))}</text>')
        p.append(f'<text x="{LEFT + pw / 2}" y="{HEIGHT - 10}" text-anchor="middle">{html.escape(self.x_label)}</text>')
        p.append(f'<text transform="translate(16,{TOP + ph / 2}) rotate(-90)" text-anchor="middle">'
                 f'{html.escape(self.y_label)}</text>')

    def add_legend(self, color, label, dashed=False):
        self.legend.append((color, label, dashed))

    def svg(self):
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
               f'font-family="sans-serif" font-size="12">',
               f'<text x="{LEFT}" y="24" font-size="16" font-weight="bold">{html.escape(self.title)}</text>']
        out += self.parts
        for i, (color, label, dashed) in enumerate(self.legend):
            y = TOP + 10 + 20 * i
            dash = ' stroke-dasharray="6 4"' if dashed else ""
            out.append(f'<line x1="{WIDTH - RIGHT + 12}" x2="{WIDTH - RIGHT + 40}" y1="{y}" y2="{y}" '
                       f'stroke="{color}" stroke-width="4"{dash}/>')
            out.append(f'<text x="{WIDTH - RIGHT + 46}" y="{y + 4}">{html.escape(label)}</text>')
        out.append("</svg>")
        return "\n".join(out)


def line_plot(title, x_label, y_label, series):
    """series: [(label, color, dashed, [(x, y), ...])]; x on a log2 axis."""
    xs = sorted({x for s in series for x, _ in s[3]})
    lo, hi = math.log2(xs[0]), math.log2(xs[-1])
    span = hi - lo or 1
    plot = Plot(title, x_label, y_label)
    plot.frame(xs, max(y for s in series for _, y in s[3]) * 1.05, lambda x: (math.log2(x) - lo) / span)
    for label, color, dashed, points in series:
        pts = " ".join(f"{plot.sx(x):.1f},{plot.sy(y):.1f}" for x, y in points)
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        plot.parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="3"{dash}/>')
        for x, y in points:
            plot.parts.append(f'<circle cx="{plot.sx(x):.1f}" cy="{plot.sy(y):.1f}" r="4" fill="{color}"/>')
        plot.add_legend(color, label, dashed)
    return plot.svg()


def bar_plot(title, y_label, groups, bar_labels, colors):
    """groups: [(group label, [value per bar])]."""
    plot = Plot(title, "", y_label)
    n = len(groups)
    plot.frame(range(n), max(v for _, vals in groups for v in vals) * 1.1, lambda i: (i + 0.5) / n,
               x_text=lambda i: groups[i][0])
    pw = WIDTH - LEFT - RIGHT
    group_w = pw / n * 0.7
    bar_w = group_w / len(bar_labels)
    for i, (_, vals) in enumerate(groups):
        x0 = plot.sx(i) - group_w / 2
        for j, v in enumerate(vals):
            y = plot.sy(v)
            plot.parts.append(f'<rect x="{x0 + j * bar_w:.1f}" y="{y:.1f}" width="{bar_w * 0.9:.1f}" '
                              f'height="{plot.sy(0) - y:.1f}" fill="{colors[j]}"><title>{fmt(v)}</title></rect>')
    for label, color in zip(bar_labels, colors):
        plot.add_legend(color, label)
    return plot.svg()


def page(plots, caption):
    figures = "\n".join(
        f'<div class="plot" id="plot-{i}" style="position:absolute; left:20px; top:{90 + 430 * i}px; '
        f'width:{WIDTH}px; height:{HEIGHT}px">{svg}</div>' for i, svg in enumerate(plots))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>kvg benchmarks</title></head>
<body style="margin:0; background:#fff; font-family:sans-serif">
<div style="position:absolute; left:20px; top:10px; width:900px; font-size:13px">
<h1 style="font-size:20px; margin:0 0 6px 0">kvg benchmarks</h1>{html.escape(caption)}</div>
{figures}
</body></html>
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kvg", default=os.path.join(os.path.dirname(__file__), "..", "build", "cli", "kvg"))
    ap.add_argument("--model", action="append", required=True, help="a GGUF model (repeat for several)")
    ap.add_argument("--out", required=True, help="the HTML file to write")
    ap.add_argument("--lengths", default="64,128,256,512,1024", help="bench-graft prefix lengths")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--prompt-tokens", default="128")
    ap.add_argument("--gen-tokens", default="64")
    a = ap.parse_args()

    benches, grafts = [], []
    for m in a.model:
        common = ["--model", m, "--threads", a.threads, "--json"]
        benches.append(run_json([a.kvg, "bench", *common, "--skip-memory", "--prompt-tokens", a.prompt_tokens,
                                 "--gen-tokens", a.gen_tokens]))
        grafts.append(run_json([a.kvg, "bench-graft", *common, "--lengths", a.lengths]))
    names = [os.path.basename(m).removesuffix(".gguf") for m in a.model]

    series = []
    for i, (name, g) in enumerate(zip(names, grafts)):
        color = PALETTE[(2 * i) % len(PALETTE)], PALETTE[(2 * i + 1) % len(PALETTE)]
        series.append((f"{name}: graft + 1 token", color[0], False,
                       [(r["tokens"], r["graft_ms"]) for r in g["rows"]]))
        series.append((f"{name}: recompute", color[1], True, [(r["tokens"], r["recompute_ms"]) for r in g["rows"]]))
    plots = [line_plot("Graft a stored prefix vs recompute it", "prefix tokens (log scale)", "ms", series)]
    plots.append(bar_plot("Prefill and decode throughput", "tokens/s",
                          [(n, [b["prefill"]["tokens_per_s"], b["decode"]["tokens_per_s"]]) for n, b in
                           zip(names, benches)], ["prefill", "decode"], PALETTE[:2]))
    io = grafts[0]["store_io"]
    plots.append(bar_plot(f"File store vs plain file I/O ({io['bytes']} bytes, {names[0]}'s longest artifact)",
                          "MB/s", [("write", [io["store_put_mbps"], io["file_write_mbps"]]),
                                   ("read", [io["store_get_mbps"], io["file_read_mbps"]])],
                          ["FileStore (hash, verify)", "plain file"], PALETTE[2:4]))
    exact = all(g["all_exact"] for g in grafts)
    caption = (f"recipe {benches[0]['recipe']}, isa {benches[0]['isa']}, {a.threads} thread(s); every grafted row "
               f"{'gave' if exact else 'did NOT give'} the recomputed logits bytes exactly. "
               f"Store I/O reads hit the page cache.")
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(page(plots, caption))
    print(a.out)
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
