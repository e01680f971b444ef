#!/usr/bin/python3
"""Trains the model that reads: a small llama-architecture model that, on the
digit-rule family of `kvg eval --generator digit-rule`, solves a question
cold by writing out the rule and every step, answers in a few tokens when a
verified solution of the same question is in its context, and reads the rule
from a related question's solution when it has never seen the family.

Its data comes from the same generator `kvg eval` evaluates with (run as
`KVG eval --generator digit-rule --training-split --seed S --count N --dump -`),
from the part of the question space reserved for training and from the
32 families not held out, so no evaluation seed holds a question it saw.
The prompt layouts are those of kvg's flywheel with the knowledge template
"{solution}\\n{question}" (engine/knowledge_prompt.hpp):

  cold        <s> \\n Q            -> worked solution \\n
  recurring   <s> S(Q) \\n Q       -> short answer \\n
  transfer    <s> S(P) \\n Q       -> worked solution of Q \\n   (P: same family;
                                    some differ from Q in one digit only)

The first answer token (short answer or worked solution) is weighted 10-20x
in the loss: without it a model learns to copy and to chain but not to tell
whether the question in context is the one asked. Some rows with a solution
in context get a family name no evaluation set uses (--rename-share), so that
reading the rule and comparing the digits is practised where the name recalls
no rule, as on the held-out kinds.

Deterministic for a seed and a thread count (PyTorch CPU, Debian's
python3-torch; libopenblas0-pthread makes it several times faster).
Usage: tools/train-reader/train.py --kvg build/cli/kvg --out reader.gguf
"""
import argparse
import math
import os
import random
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_writer import write_gguf, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY  # noqa: E402
from reader_data import BOS, CHARS, END, SPECIALS, TEMPLATE_MIDDLE, digits, encode, generate  # noqa: E402


def piece(c):
    return "\u2581" if c == " " else c


# Family names training sets never use (theirs are K10..K49). A row whose
# family is renamed to one of these holds a rule the model cannot recall from
# the name, as on the unseen kinds: it must read the rule from the solution in
# context, and tell the same question from another one by its digits alone,
# whatever the name. Evaluation sets call every rule by a second name,
# K50..K89 (cli/eval/eval_generator.cpp): in training those names occur only
# here, each row with another rule, so none of them recalls a rule.
FRESH_NAMES = [f"K{n:02d}" for n in list(range(0, 10)) + list(range(50, 100))]


def renamed(item, name):
    fam = item["family"]
    # The solution names its family once, where it restates the question.
    return dict(item, family=name, question=name + item["question"][len(fam):],
                solution=item["solution"].replace(fam + " ", name + " "))


# ---------------------------------------------------------------- the model
class Block(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.attn_norm = nn.Parameter(torch.ones(d))
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.ffn_norm = nn.Parameter(torch.ones(d))
        self.gate = nn.Linear(d, ff, bias=False)
        self.up = nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)


def rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, cos, sin):
    # Adjacent pairs (x[2i], x[2i+1]) rotate together: llama's GGUF layout.
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).flatten(-2)


class Reader(nn.Module):
    def __init__(self, vocab, d=128, layers=4, heads=4, ff=352, ctx=256, eps=1e-5, base=10000.0):
        super().__init__()
        self.cfg = dict(vocab=vocab, d=d, layers=layers, heads=heads, ff=ff, ctx=ctx, eps=eps, base=base)
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d, heads, ff) for _ in range(layers)])
        self.norm = nn.Parameter(torch.ones(d))
        self.out = nn.Linear(d, vocab, bias=False)
        hd = d // heads
        inv = base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        ang = torch.arange(ctx, dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", ang.cos().float(), persistent=False)
        self.register_buffer("sin", ang.sin().float(), persistent=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, ids):
        B, T = ids.shape
        c = self.cfg
        hd = c["d"] // c["heads"]
        cos, sin = self.cos[:T], self.sin[:T]
        mask = torch.full((T, T), float("-inf")).triu(1)
        x = self.embed(ids)
        for b in self.blocks:
            h = rms(x, b.attn_norm, c["eps"])
            q = b.q(h).view(B, T, c["heads"], hd).transpose(1, 2)
            k = b.k(h).view(B, T, c["heads"], hd).transpose(1, 2)
            v = b.v(h).view(B, T, c["heads"], hd).transpose(1, 2)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            att = (q @ k.transpose(-1, -2)) / math.sqrt(hd) + mask
            y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, c["d"])
            x = x + b.o(y)
            h = rms(x, b.ffn_norm, c["eps"])
            x = x + b.down(F.silu(b.gate(h)) * b.up(h))
        return self.out(rms(x, self.norm, c["eps"]))


def export_gguf(model, path):
    c = model.cfg
    pieces = SPECIALS + [piece(ch) for ch in CHARS]
    types = [2, 3, 3] + [1] * len(CHARS)
    meta = [
        ("general.architecture", STRING, "llama"),
        ("general.name", STRING, "kvgraft digit-rule reader"),
        ("general.license", STRING, "MIT"),
        ("llama.context_length", UINT32, c["ctx"]),
        ("llama.embedding_length", UINT32, c["d"]),
        ("llama.feed_forward_length", UINT32, c["ff"]),
        ("llama.block_count", UINT32, c["layers"]),
        ("llama.attention.head_count", UINT32, c["heads"]),
        ("llama.attention.head_count_kv", UINT32, c["heads"]),
        ("llama.rope.dimension_count", UINT32, c["d"] // c["heads"]),
        ("llama.rope.freq_base", FLOAT32, c["base"]),
        ("llama.attention.layer_norm_rms_epsilon", FLOAT32, c["eps"]),
        ("llama.vocab_size", UINT32, c["vocab"]),
        ("tokenizer.ggml.model", STRING, "llama"),
        ("tokenizer.ggml.tokens", (ARRAY, STRING), pieces),
        ("tokenizer.ggml.scores", (ARRAY, FLOAT32), [0.0] * len(pieces)),
        ("tokenizer.ggml.token_type", (ARRAY, INT32), types),
        ("tokenizer.ggml.unknown_token_id", UINT32, 0),
        ("tokenizer.ggml.bos_token_id", UINT32, 1),
        ("tokenizer.ggml.eos_token_id", UINT32, 2),
        ("tokenizer.ggml.add_bos_token", BOOL, True),
        ("tokenizer.ggml.add_space_prefix", BOOL, False),
        # The layout the reader is trained on (the examples below): kvg lays
        # knowledge prompts out with it when no template is given
        # (engine/knowledge_prompt.hpp knowledge_template_for). Last, where
        # `kvg template --set` adds it to a model without one.
        ("kvg.knowledge_template", STRING, "{solution}" + TEMPLATE_MIDDLE + "{question}"),
    ]
    t = lambda p: p.detach().float().numpy()  # noqa: E731
    tensors = [("token_embd.weight", t(model.embed.weight)), ("output_norm.weight", t(model.norm)),
               ("output.weight", t(model.out.weight))]
    for i, b in enumerate(model.blocks):
        tensors += [(f"blk.{i}.attn_norm.weight", t(b.attn_norm)), (f"blk.{i}.attn_q.weight", t(b.q.weight)),
                    (f"blk.{i}.attn_k.weight", t(b.k.weight)), (f"blk.{i}.attn_v.weight", t(b.v.weight)),
                    (f"blk.{i}.attn_output.weight", t(b.o.weight)), (f"blk.{i}.ffn_norm.weight", t(b.ffn_norm)),
                    (f"blk.{i}.ffn_gate.weight", t(b.gate.weight)), (f"blk.{i}.ffn_up.weight", t(b.up.weight)),
                    (f"blk.{i}.ffn_down.weight", t(b.down.weight))]
    write_gguf(path, meta, tensors)


# ---------------------------------------------------------------- the data
def cold(q):
    return [BOS] + encode(TEMPLATE_MIDDLE + q["question"]), encode(q["solution"] + END)


def recurring(q):
    return [BOS] + encode(q["solution"] + TEMPLATE_MIDDLE + q["question"]), encode(q["answer"] + END)


def transfer(p, q):
    return [BOS] + encode(p["solution"] + TEMPLATE_MIDDLE + q["question"]), encode(q["solution"] + END)


class Data:
    def __init__(self, items, rng, near_share, rename_share=0.0):
        self.items = items
        self.near_share = near_share
        self.rename_share = rename_share
        self.rng = rng
        self.by_family = {}
        self.by_key = {}
        for it in items:
            self.by_family.setdefault(it["family"], []).append(it)
            self.by_key[(it["family"], digits(it))] = it

    def related(self, q):
        """Another question of q's family; near_share of the time one that differs in one digit."""
        if self.rng.random() < self.near_share:
            d = digits(q)
            near = []
            for pos in range(4):
                for c in "0123456789":
                    if c not in d:
                        other = self.by_key.get((q["family"], d[:pos] + c + d[pos + 1:]))
                        if other:
                            near.append(other)
            if near:
                return self.rng.choice(near)
        while True:
            p = self.rng.choice(self.by_family[q["family"]])
            if p is not q:
                return p

    def batch(self, layout, size, layouts=None):
        """`size` (layout, prompt, answer) rows of one layout; with `layouts`, each row's drawn from them."""
        rows = []
        for _ in range(size):
            q = self.rng.choice(self.items)
            if layouts:
                layout = self.rng.choice(layouts)
            if layout == "cold":
                rows.append((layout, *cold(q)))
                continue
            p = self.related(q)
            if self.rng.random() < self.rename_share:  # never for cold: a fresh name's rule cannot be recalled
                name = self.rng.choice(FRESH_NAMES)
                q, p = renamed(q, name), renamed(p, name)
            if layout == "contrast":  # recurring and transfer side by side: the first token must tell them apart
                if self.rng.random() < 0.5:
                    rows.append((layout, *recurring(q)))
                else:
                    prompt, answer = transfer(p, q)
                    rows.append((layout, prompt, answer[:len(q["answer"] + END)]))
            else:
                rows.append((layout, *(recurring(q) if layout == "recurring" else transfer(p, q))))
        return rows


def tensors(rows, first_weight, prompt_weight=0.0):
    """(prompt, answer) rows as padded inputs, targets and loss weights."""
    T = max(len(p) + len(a) for p, a in rows) - 1
    ids = torch.full((len(rows), T), 2, dtype=torch.long)
    tgt = torch.zeros((len(rows), T), dtype=torch.long)
    w = torch.zeros((len(rows), T))
    for r, (p, a) in enumerate(rows):
        seq = p + a
        ids[r, :len(seq) - 1] = torch.tensor(seq[:-1])
        tgt[r, :len(seq) - 1] = torch.tensor(seq[1:])
        # The prompt's own tokens too (prompt_weight): predicting the question's
        # digits from a solution in context is what teaches the model to
        # notice when they are the same question's.
        w[r, :len(p) - 1] = prompt_weight
        w[r, len(p) - 1:len(seq) - 1] = 1.0
        w[r, len(p) - 1] = first_weight
    return ids, tgt, w


@torch.no_grad()
def exact(model, rows):
    """How many rows the model completes exactly: with teacher forcing, every
    answer position's argmax is the target, which is what greedy decoding
    of the prompt would produce (one forward pass instead of one per token)."""
    ids, tgt, w = tensors(rows, 1.0)
    ok = ((model(ids).argmax(-1) == tgt) | (w == 0)).all(-1)
    return int(ok.sum())


def monitor(model, items):
    """Exact completions per layout and kind on a fixed evaluation-split sample (it only prints)."""
    model.eval()
    res = {}
    fam = {}
    for it in items:
        fam.setdefault(it["family"], []).append(it)
    for kind in ("seen", "unseen"):
        qs = [it for it in items if it["kind"] == kind and len(fam[it["family"]]) > 1][:32]
        for layout in ("cold", "recurring", "transfer"):
            rows = [cold(q) if layout == "cold" else recurring(q) if layout == "recurring" else
                    transfer(next(p for p in fam[q["family"]] if p is not q), q) for q in qs]
            res[f"{layout}/{kind}"] = f"{exact(model, rows)}/{len(rows)}"
    model.train()
    return res


@torch.no_grad()
def check_export(model, kvg, path, item):
    """The written GGUF, run by kvg, must give the logits torch gives (up to
    float rounding: the engine's recipe sums in its own order)."""
    import numpy as np
    import tempfile
    prompt, answer = transfer(item, item)
    ids = prompt + answer[:8]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "logits.bin")
        subprocess.run([kvg, "logits", "--model", path, "--tokens", ",".join(map(str, ids)), "--out", out],
                       check=True, capture_output=True)
        engine = np.fromfile(out, dtype="<f4").reshape(len(ids), -1)
    model.eval()
    ours = model(torch.tensor([ids]))[0].numpy()
    model.train()
    diff = float(np.abs(engine - ours).max())
    same_argmax = bool((engine.argmax(-1) == ours.argmax(-1)).all())
    print(f"export check: kvg logits vs torch on {len(ids)} tokens: max |difference| {diff:.2e}, "
          f"argmax {'equal' if same_argmax else 'DIFFERENT'}", flush=True)
    if diff > 1e-3 or not same_argmax:
        raise SystemExit(f"{path}: the engine's logits differ from torch's: the export is wrong")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvg", default="build/cli/kvg", help="the kvg command (its generator makes the data)")
    ap.add_argument("--out", required=True, help="the GGUF file to write")
    ap.add_argument("--steps", type=int, default=700, help="the length of the learning-rate schedule")
    ap.add_argument("--stop-at", type=int, help="stop after this step (the schedule stays --steps long)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--train-seeds", default="101,102,103,104", help="generator seeds of the training data")
    ap.add_argument("--per-seed", type=int, default=12000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--ff", type=int, default=192)
    ap.add_argument("--init", help="start from this state (the .pt a run writes next to its GGUF): a second phase")
    ap.add_argument("--prompt-weight", type=float, default=0.0, help="loss weight of the prompt's tokens")
    ap.add_argument("--near-share", type=float, default=0.5,
                    help="transfer contexts that differ from the question in one digit only")
    ap.add_argument("--mix", default="2,4,4,0",
                    help="cold,recurring,transfer,contrast batches in every ten (contrast: recurring and transfer "
                         "examples in one batch, the transfer ones cut after as many tokens as a short answer)")
    ap.add_argument("--mixed-batches", action="store_true",
                    help="draw every row's layout from --mix, so that each batch holds recurring and transfer "
                         "examples side by side (the first answer token's gradient then rewards telling them apart "
                         "rather than the layout of the last batch)")
    ap.add_argument("--check-export", action="store_true",
                    help="after each export, compare kvg logits on the written file with torch's")
    ap.add_argument("--rename-share", type=float, default=0.0,
                    help="recurring, transfer and contrast rows whose family gets a name no evaluation family has "
                         "(the same rule): practice for the unseen kinds, read the rule, compare the digits")
    ap.add_argument("--final-lr-share", type=float, default=0.1,
                    help="the cosine schedule ends at this share of --lr")
    ap.add_argument("--first-token-weight", type=float, default=10.0)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--monitor-every", type=int, default=50)
    ap.add_argument("--monitor-seed", type=int, default=424242,
                    help="an evaluation-split seed sampled only to print progress (it never changes the training)")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    rng = random.Random(args.seed)

    t0 = time.time()
    items, seen = [], set()
    for s in args.train_seeds.split(","):
        for it in generate(args.kvg, int(s), args.per_seed, True):
            if it["question"] not in seen:
                seen.add(it["question"])
                items.append(it)
    assert all(it["kind"] == "seen" for it in items), "the training split must hold seen families only"
    watch = generate(args.kvg, args.monitor_seed, 400, False)
    print(f"data: {len(items)} training questions from seeds {args.train_seeds}, {time.time() - t0:.1f} s",
          flush=True)

    data = Data(items, rng, args.near_share, args.rename_share)
    model = Reader(len(SPECIALS) + len(CHARS), d=args.dim, layers=args.layers, heads=args.heads, ff=args.ff)
    if args.init:
        model.load_state_dict(torch.load(args.init))
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters, {n_params * 4 / 1e6:.2f} MB as float32", flush=True)
    decay = [p for p in model.parameters() if p.dim() == 2]
    other = [p for p in model.parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": other, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98))
    warm = 30
    floor = args.final_lr_share
    mix = [int(x) for x in args.mix.split(",")]
    layouts = ["cold"] * mix[0] + ["recurring"] * mix[1] + ["transfer"] * mix[2] + ["contrast"] * mix[3]
    start = time.time()
    last = min(args.steps, args.stop_at or args.steps)
    for step in range(1, last + 1):
        lr = args.lr * (step / warm if step <= warm else
                        floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * (step - warm) / (args.steps - warm))))
        for g in opt.param_groups:
            g["lr"] = lr
        layout = "mixed" if args.mixed_batches else rng.choice(layouts)
        rows = data.batch(layout, args.batch, layouts if args.mixed_batches else None)
        # One forward pass per layout, gradients summed: a mixed batch's cold
        # rows (half as long as transfer ones) are then not padded to the
        # longest row, which saves a third of the work; the loss is the same.
        groups = [[(p, a) for lay, p, a in rows if lay == name] for name in sorted({lay for lay, _, _ in rows})]
        parts = [tensors(g, args.first_token_weight, args.prompt_weight) for g in groups]
        total_w = sum(w.sum() for _, _, w in parts)
        opt.zero_grad()
        loss = 0.0
        for ids, tgt, w in parts:
            logits = model(ids)
            part = (F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="none")
                    * w.reshape(-1)).sum() / total_w
            part.backward()
            loss += part.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % args.log_every == 0:
            el = time.time() - start
            print(f"step {step} {layout:9s} loss {loss:.4f} lr {lr:.5f} {el:.0f} s "
                  f"({el / step:.2f} s/step)", flush=True)
        if step % args.monitor_every == 0 or step == last:
            print(f"step {step} monitor {monitor(model, watch)}", flush=True)
            export_gguf(model, args.out)
            torch.save(model.state_dict(), args.out + ".pt")
            if args.check_export:
                check_export(model, args.kvg, args.out, watch[0])
    print(f"training time: {time.time() - start:.0f} s for {last} steps; wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
