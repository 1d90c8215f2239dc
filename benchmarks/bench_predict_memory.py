"""Benchmark: peak memory of ``agnostophobia predict`` on a folder of 10,000 and of 100,000 tiny
images. ``predict`` decodes a run's ``eval_batch_size`` images at a time, so the peak for
100,000 images must stay within 1.2 x the peak for 10,000 (what grows is only the rows).

    AGNOSTOPHOBIA_DATA=/path/to/data python benchmarks/bench_predict_memory.py --run RUN
        [--counts 10000 100000] [--limit 1.2] [--keep-images DIR]

``RUN`` is a calibrated run (any LeNet++ run after ``agnostophobia calibrate RUN --fpr 0.1``).
The images (28 x 28 grey PNGs, random pixels on black) are written under a temporary folder
(or ``--keep-images``) and each count is predicted by a fresh process, whose peak resident
set (``ru_maxrss``) is reported. Exits with status 1 when the ratio exceeds ``--limit``.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CHILD = """
import resource, sys
from agnostophobia.cli import main
code = main(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(code)
"""


def write_images(folder: Path, count: int) -> None:
    """``count`` 28 x 28 grey PNGs under ``folder`` (1,000 per sub-folder), written once."""
    from PIL import Image

    rng = np.random.default_rng(0)
    have = sum(1 for _ in folder.rglob("*.png")) if folder.exists() else 0
    for i in range(have, count):
        pixels = np.zeros((28, 28), np.uint8)
        pixels[8:20, 8:20] = rng.integers(0, 256, (12, 12), dtype=np.uint8)  # a bright glyph on black
        path = folder / f"{i // 1000:04d}" / f"{i:06d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(path)


def peak_of_predict(run: Path, folder: Path, out: Path) -> tuple:
    """(peak resident MiB, seconds) of ``predict RUN FOLDER --out OUT`` in a fresh process."""
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", CHILD, "predict", str(run), str(folder), "--out", str(out)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"predict failed: {result.stderr.strip()[-500:]}")
    return int(result.stderr.strip().splitlines()[-1]) / 1024, time.monotonic() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a calibrated run")
    parser.add_argument("--counts", type=int, nargs=2, default=[10_000, 100_000])
    parser.add_argument("--limit", type=float, default=1.2, help="largest allowed ratio of the two peaks")
    parser.add_argument("--keep-images", type=Path, help="write (and reuse) the images here")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-predict-memory-") as tmp:
        root = args.keep_images or Path(tmp) / "images"
        peaks = []
        for count in args.counts:
            folder = root / f"n{count}"
            write_images(folder, count)
            peak, seconds = peak_of_predict(args.run, folder, Path(tmp) / f"rows-{count}.csv")
            peaks.append(peak)
            print(f"{count:>7} images: peak {peak:7.1f} MiB, {seconds:6.1f} s")
    ratio = peaks[1] / peaks[0]
    print(f"ratio {ratio:.3f} (limit {args.limit})")
    return 0 if ratio <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
