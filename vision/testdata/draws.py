"""Regenerates draws.json: the crops and flips python/sluice/images.py
(the Python port of vision's per-sample generator) draws, which
TestDrawsMatchPythonPort checks vision draws too.

    /usr/bin/python3 vision/testdata/draws.py
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

from sluice import images  # noqa: E402


def main():
    out = []
    cases = [(500, 375, (0.08, 1.0), (3 / 4, 4 / 3)), (64, 48, (0.2, 1.0), (3 / 4, 4 / 3)),
             (1000, 90, (0.08, 1.0), (3 / 4, 4 / 3)), (37, 300, (0.5, 0.9), (0.5, 2.0))]
    for seed in (0, 9176, 2**64 - 1):
        for epoch in (0, 3):
            for w, h, scale, ratio in cases:
                for sample in (0, 1, 17, 123456789, 2**40 + 5):
                    r = images._RNG(seed, epoch, sample)
                    box = images._random_crop(r, w, h, scale, ratio)
                    flip = r.float() < 0.5
                    out.append({"seed": str(seed), "epoch": epoch, "sample": sample, "w": w, "h": h, "scale": scale,
                                "ratio": ratio, "box": box, "flip": flip})
    with open(os.path.join(HERE, "draws.json"), "w") as f:
        json.dump(out, f, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
