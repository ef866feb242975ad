#!/usr/bin/env python3
"""Writes examples/data/tiny.txt: a deterministic synthetic English-like corpus.

The default example trains on it with no download. It has structure at several scales
(spelling, word order, agreement, arithmetic facts) so a small model's loss drops visibly
below the ln(256) = 5.55 nats of a uniform guess over bytes within a minute.
Usage: python3 scripts/gen_tiny_text.py [OUT] [BYTES]
"""
import random
import sys

SUBJECTS = ["the cat", "a dog", "the old sailor", "my sister", "the small robot", "a farmer",
            "the teacher", "our neighbour", "the young king", "a tired student"]
VERBS = ["sees", "finds", "likes", "carries", "paints", "follows", "builds", "forgets",
         "reads", "opens"]
OBJECTS = ["a red ball", "the blue door", "an apple", "the long river", "a quiet song",
           "the heavy box", "a paper boat", "the green hill", "an old map", "the bright lamp"]
PLACES = ["in the morning", "at night", "near the sea", "under the bridge", "after lunch",
          "in the garden", "before the rain", "on the hill"]
NUMBERS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def sentence(rng):
    kind = rng.random()
    if kind < 0.6:
        s = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}"
        if rng.random() < 0.5:
            s += " " + rng.choice(PLACES)
        return s[0].upper() + s[1:] + "."
    if kind < 0.85:
        a, b = rng.randrange(10), rng.randrange(10)
        return f"{a} + {b} = {a + b}."
    a = rng.randrange(10)
    return f"{NUMBERS[a].capitalize()} is written {a}."


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "examples/data/tiny.txt"
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 200_000
    rng = random.Random(20261122)
    parts, n = [], 0
    while n < size:
        line = " ".join(sentence(rng) for _ in range(rng.randrange(3, 7))) + "\n"
        parts.append(line)
        n += len(line)
    with open(out, "w", encoding="ascii") as f:
        f.write("".join(parts)[:size])


if __name__ == "__main__":
    main()
