#!/usr/bin/python3
"""Plots `kvg eval --json` results: cold, recurring and transfer side by side
(accuracy, overall and per kind; decoded tokens per answer; estimated FLOPs
per answer), one group of bars per result file.

  kvg eval --model M --generator digit-rule --seed 11 --json > s11.json
  scripts/eval-plot.py s11.json s12.json -o eval.png

Uses Debian's python3-matplotlib (scripts/install-deps.sh --with-training
installs it; nothing in the tests needs it)."""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PHASES = ("cold", "recurring", "transfer")
COLOURS = {"cold": "#8c8c8c", "recurring": "#1f77b4", "transfer": "#ff7f0e"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="kvg eval --json outputs")
    ap.add_argument("-o", "--out", default="eval.png", help="the image to write (.png or .svg)")
    args = ap.parse_args()
    runs = []
    for path in args.results:
        with open(path) as f:
            runs.append((os.path.splitext(os.path.basename(path))[0], json.load(f)))

    # Accuracy columns: all, then each kind the results label.
    kinds = sorted({k for _, d in runs for p in PHASES for k in d[p].get("by_kind", {})})
    groups = [(name, None) for name, _ in runs] + [(name, k) for name, _ in runs for k in kinds]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    width = 0.8 / len(PHASES)

    def bars(ax, labels, value):
        for i, phase in enumerate(PHASES):
            xs = [g + (i - 1) * width for g in range(len(labels))]
            ys = [value(label, phase) for label in labels]
            ax.bar(xs, ys, width, label=phase, color=COLOURS[phase])
            for x, y in zip(xs, ys):
                ax.annotate(f"{y:.3g}", (x, y), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(labels)))

    data = dict(runs)

    def part(name, kind, phase):
        d = data[name][phase]
        return d["by_kind"][kind] if kind else d

    bars(axes[0], groups, lambda g, p: 100 * part(g[0], g[1], p)["accuracy"])
    axes[0].set_xticklabels([f"{n}\n{k or 'all'}" for n, k in groups], fontsize=8)
    axes[0].set_ylabel("accuracy, %")
    axes[0].set_ylim(0, 110)
    names = [(n, None) for n, _ in runs]
    bars(axes[1], names, lambda g, p: part(g[0], None, p)["decode_tokens_mean"])
    axes[1].set_xticklabels([n for n, _ in names], fontsize=8)
    axes[1].set_ylabel("decoded tokens per answer")
    bars(axes[2], names, lambda g, p: part(g[0], None, p)["flops_mean"] / 1e6)
    axes[2].set_xticklabels([n for n, _ in names], fontsize=8)
    axes[2].set_ylabel("MFLOP per answer (an estimate)")
    for ax in axes[1:]:
        ax.margins(y=0.12)  # room for the value above the tallest bar
    fig.suptitle("kvg eval: cold vs recurring vs transfer")
    fig.tight_layout()
    # One legend for the three panels, under the figure (below the tick
    # labels), never over a bar or its value; bbox_inches="tight" grows the
    # image to hold it.
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0), ncol=len(PHASES), frameon=False)
    fig.savefig(args.out, dpi=110, bbox_inches="tight")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
