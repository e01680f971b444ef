#!/usr/bin/env python3
"""Plots kvg's benchmarks as one self-contained HTML page and/or a PNG.

    scripts/bench-report.py --model A.gguf [--model B.gguf ...] [--out report.html] [--png report.png]
    kvg bench -m M --json | scripts/bench-report.py - --out report.html
    scripts/bench-report.py bench.json graft.json --png report.png

With --model, runs `kvg bench --json` (prefill and decode tokens/s, mean and
standard deviation of --repetitions runs) and `kvg bench-graft --json` (graft
+ 1 token vs recompute by prefix length; file store vs plain file I/O) on each
model, the prefix lengths clamped to the model's context. Otherwise it reads
those commands' JSON documents from files or `-` (standard input).

The plots are drawn by matplotlib (Debian: python3-matplotlib): times on log
axes, the graft's speed-up as a curve of its own, every value labelled. The
page embeds them as inline SVG: no script, nothing fetched, one file to
archive. A header names the machine, CPU, kvg's commit, the date and the
repetitions. Layout is fixed (header 0..HEADER px, plot i at HEADER + i x
(FIG_H + GAP) px, 20 px from the left, FIG_W x FIG_H) so that
tests/report/bench_report_test.sh can find the parts in a screenshot.
"""
import argparse
import datetime
import html
import io
import json
import math
import os
import platform
import shutil
import subprocess
import sys

DEBIAN_PYTHON = "/usr/bin/python3"

try:
    import matplotlib
except ImportError:
    # Debian's python3-matplotlib serves Debian's interpreter; another python3
    # first on PATH (pyenv, a venv) does not see it.
    if os.path.realpath(sys.executable) != os.path.realpath(DEBIAN_PYTHON) and os.path.exists(DEBIAN_PYTHON):
        os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON, *sys.argv])
    sys.exit("bench-report: matplotlib is missing (Debian: apt-get install python3-matplotlib, "
             "or scripts/install-deps.sh --tests)")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

FIG_W, FIG_H, DPI = 900, 400, 100  # each plot, in CSS pixels
HEADER, GAP, LEFT = 150, 20, 20
COLORS = plt.get_cmap("tab10").colors
DEFAULT_LENGTHS = "64,128,256,512,1024"

plt.rcParams.update({
    "font.family": "DejaVu Sans", "font.size": 10, "axes.titlesize": 12, "axes.titleweight": "bold",
    "svg.fonttype": "none",   # text stays text: searchable, and sharp at any zoom
    "svg.hashsalt": "kvg",    # the same data gives the same page
    "axes.spines.top": False, "axes.spines.right": False,
})


class KvgFailed(Exception):
    """A kvg command failed: its own words are the report's error."""


def fail(message):
    sys.exit(f"bench-report: {message}")


# ---------------------------------------------------------------- gathering

def find_kvg(given):
    if given:
        if not (os.path.isfile(given) and os.access(given, os.X_OK)):
            fail(f"--kvg {given} is not an executable file")
        return given
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    built = os.path.join(repo, "build", "cli", "kvg")
    if os.access(built, os.X_OK):
        return built  # this checkout's own build first: the script and the command agree
    on_path = shutil.which("kvg")
    if on_path:
        return on_path
    fail(f"no kvg: neither {built} (scripts/build.sh kvg) nor one on PATH; or give --kvg PATH")


def run_kvg(kvg, args):
    """kvg's JSON document; KvgFailed with kvg's own error when it fails."""
    cmd = [kvg, *args]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        words = done.stderr.strip() or done.stdout.strip() or "(no message)"
        raise KvgFailed(f"`{' '.join(cmd)}` failed (exit {done.returncode}):\n{words}")
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError as e:
        raise KvgFailed(f"`{' '.join(cmd)}` did not print one JSON document ({e})")


def clamp_lengths(lengths, context):
    """Prefix lengths within the context (one position is for the next
    token); a longer one becomes the longest that fits."""
    longest = context - 1
    out = sorted({min(n, longest) for n in lengths if n >= 1})
    if not out:
        raise KvgFailed(f"the model's context ({context} positions) holds no prefix")
    return out


def measure(a, kvg):
    """bench and bench-graft documents for every --model."""
    lengths = [int(x) for x in a.lengths.split(",")]
    docs = []
    for m in a.model:
        info = run_kvg(kvg, ["info", "-m", m, "--json"])
        context = int(info["context_length"])
        engine = ["-m", m, "-t", str(a.threads), "--json"] if a.threads else ["-m", m, "--json"]
        # A short context gets a shorter prompt and decode: both must fit in it.
        prompt = min(a.prompt_tokens, context // 2)
        gen = min(a.gen_tokens, context - prompt)
        docs.append(run_kvg(kvg, ["bench", *engine, "-r", str(a.repetitions), "--skip-memory",
                                  "-p", str(prompt), "-n", str(gen)]))
        # Best of as many runs at every length: one run of a long prefix is at the mercy of the machine's load.
        docs.append(run_kvg(kvg, ["bench-graft", *engine, "-r", str(a.repetitions), "--lengths",
                                  ",".join(map(str, clamp_lengths(lengths, context)))]))
    return docs


def read_inputs(paths):
    docs = []
    for p in paths:
        try:
            text = sys.stdin.read() if p == "-" else open(p, encoding="utf-8").read()
        except OSError as e:
            fail(f"cannot read {p}: {e.strerror}")
        name = "standard input" if p == "-" else p
        if not text.strip():
            fail(f"{name} is empty (did the kvg command before the pipe fail?)")
        try:
            docs.append(json.loads(text))
        except json.JSONDecodeError as e:
            fail(f"{name} is not one JSON document ({e}); give `kvg bench --json` or `kvg bench-graft --json` output")
    return docs


def split_docs(docs):
    benches = [d for d in docs if isinstance(d, dict) and "recipes" in d]
    grafts = [d for d in docs if isinstance(d, dict) and "rows" in d and "store_io" in d]
    if len(benches) + len(grafts) != len(docs):
        fail("an input is neither `kvg bench --json` nor `kvg bench-graft --json` output "
             "(an older kvg's bench printed one line per recipe: rerun it)")
    return benches, grafts


# ----------------------------------------------------------------- plotting

def short_name(path):
    return os.path.basename(path).removesuffix(".gguf")


def ms_label(v):
    return f"{v:.3g}" if v < 1000 else f"{v:,.0f}"


def rate_label(v):
    return f"{v / 1000:.3g} GB/s" if v >= 1000 else f"{v:.3g} MB/s"


def log_axis(axis, formatter):
    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(lambda v, _: formatter(v)))
    axis.set_minor_formatter(NullFormatter())


def label_offsets(series):
    """Where each point's label goes: above it, unless another curve's point
    at the same x sits just above (then below), so labels do not collide.
    series: [[(x, y), ...], ...]; returns {(curve, x): points of offset}."""
    offsets = {}
    for i, points in enumerate(series):
        for x, y in points:
            # Another curve's point at (about) the same x: 511 beside 512 when one context is 512.
            above = [y2 for j, pts in enumerate(series) if j != i for x2, y2 in pts
                     if max(x, x2) / min(x, x2) < 1.05 and y2 >= y]
            near = any(y2 / y < 2.2 for y2 in above) if y > 0 else False
            offsets[(i, x)] = -13 if near else 7
    return offsets


def tokens_axis(ax, grafts):
    ax.set_xscale("log", base=2)
    # One tick per length, but not two that would print over each other
    # (511, a 512-position context's longest prefix, beside another's 512).
    ticks, shared = [], []
    for t in sorted({r["tokens"] for g in grafts for r in g["rows"]}, reverse=True):
        if not ticks or ticks[-1] / t > 1.1:
            ticks.append(t)
        else:
            shared.append(f"{t} is drawn at {ticks[-1]}'s tick")
    ax.set_xticks(ticks)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("prefix tokens (log scale" + "".join(f"; {s}" for s in shared) + ")")
    ax.margins(x=0.08, y=0.15)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=9, frameon=False)


def draw_curves(ax, curves, label):
    """curves: [(legend, color, line style, [(x, y), ...])], each point labelled."""
    offsets = label_offsets([c[3] for c in curves])
    for i, (legend, color, style, points) in enumerate(curves):
        ax.plot([x for x, _ in points], [y for _, y in points], style, marker="o", color=color, lw=2, label=legend)
        for x, y in points:
            ax.annotate(label(y), (x, y), textcoords="offset points", xytext=(0, offsets[(i, x)]), ha="center",
                        fontsize=8, color=color)


def draw_graft_times(ax, grafts):
    curves = []
    for i, g in enumerate(grafts):
        name, color = short_name(g["model"]), COLORS[i % len(COLORS)]
        for key, style, what in (("recompute_ms", "--", "recompute"), ("graft_ms", "-", "graft + 1 token")):
            curves.append((f"{name}: {what}", color, style, [(r["tokens"], r[key]) for r in g["rows"]]))
    draw_curves(ax, curves, ms_label)
    ax.set_yscale("log")
    log_axis(ax.yaxis, lambda v: f"{v:g}")
    ax.set_title("Graft a stored prefix vs recompute it")
    ax.set_ylabel("ms (log scale)")
    tokens_axis(ax, grafts)


def draw_speedup(ax, grafts):
    curves = [(short_name(g["model"]), COLORS[i % len(COLORS)], "-",
               [(r["tokens"], r["recompute_ms"] / r["graft_ms"]) for r in g["rows"]]) for i, g in enumerate(grafts)]
    draw_curves(ax, curves, lambda v: f"{v:.3g}×")
    ax.axhline(1, color="0.4", lw=1, ls=":")
    ax.annotate("1×: as slow as recomputing", (1, 1), xycoords=("axes fraction", "data"), xytext=(-4, 3),
                textcoords="offset points", fontsize=8, color="0.4", ha="right")
    ax.set_yscale("log")
    log_axis(ax.yaxis, lambda v: f"{v:g}×")
    ax.set_ylim(0.5, max(y for c in curves for _, y in c[3]) * 2.5)
    ax.set_title("Speed-up of grafting: recompute time ÷ graft + 1 token time")
    ax.set_ylabel("times faster (log scale)")
    tokens_axis(ax, grafts)


def grouped_bars(ax, groups, series, values, errors, colors, label):
    """Horizontal bars: a group per row (its name on the left, where long
    names fit), one bar per series in it; log x, so a bar of 0.1 stays
    visible beside one of 20,000; each bar's value written at its end."""
    height = 0.8 / len(series)
    for j, (s, color) in enumerate(zip(series, colors)):
        ys = [i + (j - (len(series) - 1) / 2) * height for i in range(len(groups))]
        xs = [values[i][j] for i in range(len(groups))]
        err = [errors[i][j] for i in range(len(groups))] if errors else None
        ax.barh(ys, xs, height * 0.9, color=color, label=s, xerr=err, capsize=3 if err else 0,
                error_kw={"elinewidth": 1, "ecolor": "0.2"})
        for i, (x, y) in enumerate(zip(xs, ys)):
            text = label(x) + (f" ± {label(err[i])}" if err else "")
            ax.annotate(text, (x + (err[i] if err else 0), y), textcoords="offset points", xytext=(4, 0),
                        va="center", fontsize=8)
    ax.set_yticks(range(len(groups)), groups)
    ax.invert_yaxis()  # the first group on top, as read
    ax.set_xscale("log")
    right = max(v + (errors[i][j] if errors else 0) for i, row in enumerate(values) for j, v in enumerate(row))
    left = min(v for row in values for v in row)
    ax.set_xlim(10 ** math.floor(math.log10(left * 0.5)), right * 12)  # room for the labels
    ax.grid(True, axis="x", which="major", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=9, frameon=False)


def draw_throughput(ax, benches):
    groups, values, errors = [], [], []
    for b in benches:
        for r in b["recipes"]:
            groups.append(short_name(b["model"]) + ("" if len(b["recipes"]) == 1 else f"\n{r['recipe']}"))
            values.append([r["prefill"]["tokens_per_s"], r["decode"]["tokens_per_s"]])
            errors.append([r["prefill"]["tokens_per_s_stddev"], r["decode"]["tokens_per_s_stddev"]])
    grouped_bars(ax, groups, ["prefill", "decode"], values, errors, COLORS[2:4], lambda v: f"{v:,.0f}")
    log_axis(ax.xaxis, lambda v: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    reps = sorted({b["repetitions"] for b in benches})
    ax.set_title(f"Prefill and decode throughput: mean ± standard deviation of {'/'.join(map(str, reps))} runs")
    ax.set_xlabel("tokens/s (log scale)")


def draw_store_io(ax, grafts):
    groups, values = [], []
    for g in grafts:
        io = g["store_io"]
        name = f"{short_name(g['model'])} ({io['bytes'] / 1e6:.3g} MB)"
        groups += [f"{name}\nwrite", f"{name}\nread"]
        values += [[io["store_put_mbps"], io["file_write_mbps"]], [io["store_get_mbps"], io["file_read_mbps"]]]
    grouped_bars(ax, groups, ["FileStore (hash + fsync;\nread: verify)", "plain file"], values, None, COLORS[4:6],
                 rate_label)
    log_axis(ax.xaxis, rate_label)
    ax.set_title("File store vs plain file I/O, each model's longest artifact")
    ax.set_xlabel("throughput (log scale; reads hit the page cache)")


def plots_for(benches, grafts):
    plots = []
    if grafts:
        plots += [lambda ax: draw_graft_times(ax, grafts), lambda ax: draw_speedup(ax, grafts)]
    if benches:
        plots.append(lambda ax: draw_throughput(ax, benches))
    if grafts:
        plots.append(lambda ax: draw_store_io(ax, grafts))
    return plots


def svg_of(draw):
    fig, ax = plt.subplots(figsize=(FIG_W / DPI, FIG_H / DPI), dpi=DPI, layout="constrained")
    draw(ax)
    out = io.StringIO()
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = out.getvalue()
    return text[text.index("<svg"):]  # the XML prolog and DOCTYPE do not belong inside HTML


# ------------------------------------------------------------------- header

def cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average():
    """The 1-minute load when the report is made: a busy machine explains a wide spread."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "unknown"


def header_facts(benches, grafts):
    docs = benches + grafts
    kvg = next((d["kvg"] for d in docs if "kvg" in d), {})
    first = docs[0]
    recipes = sorted({r["recipe"] for b in benches for r in b["recipes"]} | {g["recipe"] for g in grafts})
    reps = sorted({b["repetitions"] for b in benches})
    best_of = sorted({r["best_of"] for g in grafts for r in g["rows"] if "best_of" in r})
    runs = []
    if reps:
        runs.append(f"bench: {'/'.join(map(str, reps))} runs per recipe (mean ± standard deviation)")
    if best_of:
        runs.append(f"bench-graft: best of {'/'.join(map(str, best_of))} per length")
    exact = all(g["all_exact"] for g in grafts)
    return [
        ("machine", f"{platform.node()} ({platform.system()} {platform.release()}, {platform.machine()}), "
                    f"{os.cpu_count()} cores, load average {load_average()}"),
        ("CPU", cpu_name()),
        ("kvg", f"{kvg.get('version', '?')}, commit {kvg.get('commit', 'unknown')}"),
        ("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
        ("repetitions", "; ".join(runs) or "one run"),
        ("engine", f"recipe {', '.join(recipes)}; isa {first['isa']}; {first['threads']} thread(s)"),
        ("models", ", ".join(sorted({short_name(d["model"]) for d in docs}))
         + ("" if not grafts else "; every graft gave the recomputed logits bytes exactly" if exact
            else "; a graft did NOT give the recomputed logits bytes")),
    ]


def page(facts, svgs):
    rows = "\n".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in facts)
    figures = "\n".join(
        f'<div class="plot" id="plot-{i}" style="position:absolute; left:{LEFT}px; top:{HEADER + i * (FIG_H + GAP)}px; '
        f'width:{FIG_W}px; height:{FIG_H}px">{svg}</div>' for i, svg in enumerate(svgs))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>kvg benchmarks</title>
<style>
body {{ margin:0; background:#fff; font-family:"DejaVu Sans",sans-serif; color:#222 }}
#header {{ position:absolute; left:{LEFT}px; top:8px; width:{FIG_W}px; height:{HEADER - 16}px; overflow:hidden; font-size:12px }}
#header h1 {{ font-size:19px; margin:0 0 4px 0 }}
#header th {{ text-align:left; padding:0 12px 0 0; font-weight:bold; vertical-align:top; white-space:nowrap }}
#header td {{ padding:0 }}
#header table {{ border-collapse:collapse }}
</style></head>
<body>
<div id="header"><h1>kvg benchmarks</h1>
<table>
{rows}
</table></div>
{figures}
</body></html>
"""


def png_of(facts, plots, path):
    """The same report as one image: the header's lines, then every plot."""
    head_in = HEADER / DPI
    fig = plt.figure(figsize=(FIG_W / DPI, head_in + len(plots) * (FIG_H + GAP) / DPI), dpi=DPI, layout="constrained")
    sub = fig.subfigures(len(plots) + 1, 1, height_ratios=[HEADER] + [FIG_H + GAP] * len(plots))
    sub[0].text(0.01, 0.95, "kvg benchmarks", fontsize=16, fontweight="bold", va="top")
    for i, (k, v) in enumerate(facts):
        sub[0].text(0.01, 0.78 - i * 0.11, f"{k}: {v}", fontsize=9, va="top")
    for s, draw in zip(sub[1:], plots):
        draw(s.subplots())
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


# --------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("inputs", nargs="*", metavar="JSON",
                    help="a `kvg bench --json` or `kvg bench-graft --json` document: a file, or - for standard input")
    ap.add_argument("--model", "-m", action="append", default=[], help="run the benchmarks on this GGUF (repeat for several)")
    ap.add_argument("--out", help="the HTML page to write (default: kvg-bench-report.html when --png is not given)")
    ap.add_argument("--png", help="also (or only) write the report as one PNG image")
    ap.add_argument("--kvg", help="the kvg command (default: build/cli/kvg of this checkout, else kvg on PATH)")
    ap.add_argument("--lengths", default=DEFAULT_LENGTHS,
                    help=f"bench-graft prefix lengths, each clamped to the model's context (default {DEFAULT_LENGTHS})")
    ap.add_argument("--threads", "-t", type=int, help="worker threads (default: kvg's, one per core)")
    ap.add_argument("--repetitions", "-r", type=int, default=5,
                    help="bench runs per model, and bench-graft's best of R per length (default 5)")
    ap.add_argument("--prompt-tokens", "-p", type=int, default=128, help="bench prompt length (default 128)")
    ap.add_argument("--gen-tokens", "-n", type=int, default=64, help="bench decoded tokens (default 64)")
    a = ap.parse_args()
    if bool(a.model) == bool(a.inputs):
        ap.error("give --model (run the benchmarks) or JSON inputs (files or -), not both and not neither")
    if not a.out and not a.png:
        a.out = "kvg-bench-report.html"

    try:
        if a.model:
            kvg = find_kvg(a.kvg)
            docs = measure(a, kvg)
        else:
            docs = read_inputs(a.inputs)
    except KvgFailed as e:
        fail(str(e))
    benches, grafts = split_docs(docs)
    facts = header_facts(benches, grafts)
    plots = plots_for(benches, grafts)
    written = []
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(page(facts, [svg_of(p) for p in plots]))
        written.append(a.out)
    if a.png:
        png_of(facts, plots, a.png)
        written.append(a.png)
    print("\n".join(written))
    return 0 if all(g["all_exact"] for g in grafts) else 1


if __name__ == "__main__":
    sys.exit(main())
