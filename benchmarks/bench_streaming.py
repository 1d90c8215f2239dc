"""Peak memory and images/s of the streaming input path as a folder protocol grows 10x, and
streaming against in-memory on the same LeNet++ data (issue 11, item 6).

    AGNOSTOPHOBIA_DATA=/path/to/data python benchmarks/bench_streaming.py [--sizes 2000 20000] [--workers N]

For each size, N real MNIST training digits (cycled when N > 60,000) are written as PNG files
into a temporary folder protocol (digits 0-5 known, 6-7 negatives in train; a small fixed val
and test split, 8-9 unknowns). A fresh process per size and mode then builds the protocol
(the check pass decodes every file), and trains LeNet++ (entropic loss, batch 128) for one
epoch; for streaming it also times one pass of the loader alone (decoding, preparation and
batching, no model). Peak RSS is ``resource.getrusage`` ``ru_maxrss`` of that process and,
separately, of its largest worker process. Streaming memory should stay flat as N grows;
in-memory is run at the smallest size only. Without data it prints SKIPPED and exits 0.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KNOWN, NEGATIVE, UNKNOWN = tuple(range(6)), (6, 7), (8, 9)


def rss_mb(who=resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # KiB on Linux


def write_tree(root: Path, n_train: int, data_dir: str) -> dict:
    """A folder protocol of ``n_train`` training PNGs; returns its ``protocol:`` mapping."""
    import numpy as np
    from PIL import Image

    from agnostophobia.data import load_dataset

    digits = load_dataset("mnist", "train", data_dir)
    names = {d: f"d{d}" for d in range(10)}
    held = {d: np.flatnonzero(digits.labels == d)[-20:] for d in range(10)}  # val and test: never trained on
    usable = np.setdiff1d(np.flatnonzero(np.isin(digits.labels, KNOWN + NEGATIVE)),
                          np.concatenate(list(held.values())))

    def save(split, index, name):
        folder = root / split / names[int(digits.labels[index])]
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(digits.images[index]).save(folder / name)

    for i in range(n_train):
        save("train", usable[i % len(usable)], f"{i:06d}.png")
    for d in range(10):
        for j, index in enumerate(held[d]):
            if d not in UNKNOWN and j < 10:
                save("val", index, f"{j}.png")
            elif j >= 10:
                save("test", index, f"{j}.png")
    return {"type": "folders", "root": str(root), "known": [names[d] for d in KNOWN],
            "negative": [names[d] for d in NEGATIVE], "unknown": [names[d] for d in UNKNOWN],
            "image_size": 28, "channels": 1, "kind": "glyph"}


def measure(mapping: dict, mode: str, workers, device: str, train_max) -> dict:
    """In a fresh process: build, one loader pass (streaming), one training epoch."""
    from agnostophobia.data import build_protocol
    from agnostophobia.training.config import TrainConfig
    from agnostophobia.training.loaders import StreamedData
    from agnostophobia.training.batches import epoch_order
    from agnostophobia.training.trainer import Training, train_one_epoch

    cfg = TrainConfig(protocol=mapping, model="lenet++", approach="entropic", epochs=1, batch_size=128,
                      device=device, precision="fp32", tensorboard=False, progress=False, data_loading=mode,
                      num_workers=workers)
    start = time.perf_counter()
    protocol = build_protocol(mapping, data_loading=mode)
    row = {"mode": mode, "n": len(protocol.train), "build_s": time.perf_counter() - start}
    run = Training(cfg, protocol)
    if isinstance(run.train_data, StreamedData):
        start = time.perf_counter()
        shards = run.world.shards(epoch_order(len(run.train_data), cfg.seed, 0), cfg.batch_size)
        for _ in run.train_data.read(shards, cfg, 0):
            pass
        row["loader_images_per_s"] = len(protocol.train) / (time.perf_counter() - start)
    if train_max is None or len(protocol.train) <= train_max:
        row["train_images_per_s"] = train_one_epoch(run, 0)["train_images_per_s"]
    row["peak_rss_mb"] = rss_mb()
    row["worker_peak_rss_mb"] = rss_mb(resource.RUSAGE_CHILDREN)
    row["device"] = str(run.device)
    return row


def child(mapping: dict, mode: str, workers, device: str, train_max) -> dict:
    args = [sys.executable, __file__, "--child", json.dumps([mapping, mode, workers, device, train_max])]
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"child ({mode}) failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000], help="training PNGs per run")
    parser.add_argument("--workers", type=int, default=None, help="num_workers (default: min(4, CPUs))")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--train-max", type=int, default=None,
                        help="train an epoch only up to this many images (a slow CPU); the loader pass always runs")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(*json.loads(args.child))))
        return 0

    from agnostophobia.data import DATASETS, data_dir

    root = data_dir(args.data_dir)
    if DATASETS.get("mnist").find(root) is None:
        print(f"SKIPPED: no data in {root} (set AGNOSTOPHOBIA_DATA or --data-dir)")
        return 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_streaming_") as tmp:
        for i, size in enumerate(sorted(args.sizes)):
            start = time.perf_counter()
            mapping = write_tree(Path(tmp) / f"n{size}", size, str(root))
            print(f"wrote {size} PNGs in {time.perf_counter() - start:.1f} s", file=sys.stderr)
            modes = ("stream", "memory") if i == 0 else ("stream",)
            rows += [child(mapping, mode, args.workers, args.device, args.train_max) for mode in modes]
    header = f"{'mode':<7} {'train images':>12} {'build s':>8} {'loader img/s':>13} {'train img/s':>12} " \
             f"{'peak RSS MiB':>13} {'worker RSS MiB':>15}  device"
    print(header)
    for r in rows:
        loader, train = (f"{r[key]:.0f}" if key in r else "-" for key in ("loader_images_per_s", "train_images_per_s"))
        print(f"{r['mode']:<7} {r['n']:>12,} {r['build_s']:>8.1f} {loader:>13} {train:>12} "
              f"{r['peak_rss_mb']:>13.0f} {r['worker_peak_rss_mb']:>15.0f}  {r['device']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
