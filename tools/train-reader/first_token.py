#!/usr/bin/python3
"""The reader's first answer token, which decides between the short answer
and the worked solution, on the questions of one evaluation seed:

  recurring  the question's own solution in context: the first token should
             begin the short answer ('A'); counted when it does not
  near       the solution of a question one digit away (same family, same
             rule, one digit replaced) in context: the first token should
             begin the worked solution; counted when it is the short
             answer's, which would answer the other question

It runs the GGUF through `kvg logits` (one process per prompt), so it sees
what kvg eval decodes greedily; it needs no PyTorch. Usage:
  tools/train-reader/first_token.py --kvg build/cli/kvg --model M.gguf --seed 11
"""
import argparse
import array
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reader_data import BOS, ID, TEMPLATE_MIDDLE, digits, encode, generate  # noqa: E402


def rule_of(item):
    """(a, b) from the solution's 'K27 4192:a7b3|...'."""
    rule = item["solution"].split(":")[1].split("|")[0]
    return int(rule[1]), int(rule[3])


def solution(family, ds, a, b):
    """The generator's worked solution (cli/eval/eval_generator.cpp) for digits ds."""
    text, answer = f"{family} {ds}:a{a}b{b}", "A"
    for d in map(int, ds):
        product, total = a * d, a * d + b
        text += f"|{d}*{a}={product:02d}+{b}={total:02d}>{total % 10}"
        answer += str(total % 10)
    return text + "|" + answer


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvg", default="build/cli/kvg")
    ap.add_argument("--model", required=True)
    ap.add_argument("--seed", type=int, required=True, help="the evaluation seed whose questions are asked")
    ap.add_argument("--count", type=int, default=500)
    args = ap.parse_args()

    items = generate(args.kvg, args.seed, args.count, False)
    pick = random.Random(args.seed)
    long_answers = short_answers = 0
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.bin")

        def first_token(context, item):
            ids = [BOS] + encode(context + TEMPLATE_MIDDLE + item["question"])
            subprocess.run([args.kvg, "logits", "--model", args.model, "--tokens", ",".join(map(str, ids)),
                            "--out", out], check=True, capture_output=True)
            logits = array.array("f")
            with open(out, "rb") as f:
                logits.frombytes(f.read())
            if sys.byteorder != "little":
                logits.byteswap()
            last = logits[len(logits) // len(ids) * (len(ids) - 1):]
            return max(range(len(last)), key=last.__getitem__)

        for item in items:
            if item["solution"] != solution(item["family"], digits(item), *rule_of(item)):
                raise SystemExit(f"the generator's solution format changed: {item['solution']}")
            if first_token(item["solution"], item) != ID["A"]:
                long_answers += 1
            ds = digits(item)
            pos = pick.randrange(4)
            near = ds[:pos] + pick.choice([c for c in "0123456789" if c not in ds]) + ds[pos + 1:]
            if first_token(solution(item["family"], near, *rule_of(item)), item) == ID["A"]:
                short_answers += 1
    n = len(items)
    print(json.dumps({"model": args.model, "seed": args.seed, "questions": n,
                      "recurring_begins_worked_solution": long_answers,
                      "near_context_answers_short": short_answers}))


if __name__ == "__main__":
    main()
