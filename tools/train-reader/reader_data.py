"""What the reader's trainer and its checks share, without PyTorch: the
character vocabulary, the knowledge layout and the generator's questions
(`kvg eval --generator digit-rule --dump`)."""
import json
import subprocess

TEMPLATE_MIDDLE = "\n"  # "{solution}\n{question}": the text between the placeholders
END = "\n"              # an answer is one line (engine/answer_line.hpp)
SPECIALS = ["<unk>", "<s>", "</s>"]
CHARS = "\n ?:*+=>|0123456789AKab"
BOS = 1

ID = {c: i + len(SPECIALS) for i, c in enumerate(CHARS)}


def encode(text):
    return [ID[c] for c in text]


def generate(kvg, seed, count, training):
    cmd = [kvg, "eval", "--generator", "digit-rule", "--seed", str(seed), "--count", str(count), "--dump", "-"]
    if training:
        cmd.append("--training-split")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def digits(item):
    return item["question"].split(" ")[1][:4]
