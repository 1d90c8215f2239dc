"""The CIFAR split's near unknowns read on five times the samples: the 10,000 CIFAR-10 training
images of dog and truck, which the protocol never trains, validates, tunes or scores on, scored by a
finished benchmark run's networks and tested with the benchmark's own rules (``docs/provenance.md``,
``bench-cifar-5-xeon-near``, declares the reading)::

    python docs/near_set_study.py images dog-truck-train.npz    # --protocol cifar10-split-b: cat, ship
    agnostophobia evaluate RUN --unknowns dog-truck-train.npz
    python docs/near_set_study.py read RUN dog-truck-train docs/results/near-set-xeon.json

``read`` computes every family's tests twice, on the protocol's near D_a set (the 2,000 test
images) and on the added set alone, each from the run's stored scores with the detector settings
the run tuned on validation data; the first must repeat the run's ``benchmark.json`` to the last
digit, or nothing is written. ``docs/result_near_set.py`` reads the JSON for the pages."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import torch

from agnostophobia.data import load_dataset
from agnostophobia.data.paper_protocols import CIFAR10_PARTITIONS
from agnostophobia.deploy.compare import compare_models
from agnostophobia.detectors.stored import run_scores
from agnostophobia.metrics import resampled_se
from agnostophobia.experiments.benchmark_comparisons import compare_families, sample_replicates
from agnostophobia.experiments.benchmark_rows import ranked_sets
from agnostophobia.training.device import cpu_model
from agnostophobia.training.records import check_run

#: What each test keeps in the JSON: enough to recompute its decision and its shares.
KEPT = ("row", "against", "family", "difference", "se", "se_seeds", "se_samples", "p", "p_holm", "seeds",
        "interval", "equivalence_interval", "decision")
#: The per-seed areas each row keeps, by set: the linear OSCR area (what the tests read) and the
#: log-FPR one (from the lowest FPR the set resolves to 1).
AREAS = ("oscr", "oscr_log")


def unused_near_images(data_dir=None, protocol: str = "cifar10-split") -> np.ndarray:
    """The CIFAR-10 training images of a split's D_a classes (``cifar10-split``: dog, truck;
    ``cifar10-split-b``: cat, ship), in the file's order."""
    train = load_dataset("cifar10", "train", data_dir)
    return train.images[np.isin(train.labels, CIFAR10_PARTITIONS[protocol].unknown)]


def tests_on(result: Dict, comparison, models, scores_of, name: str) -> Tuple[Dict[str, List[Dict]], Dict[str, Dict]]:
    """Every family's tests of the run's rows, each row read on the unknown set ``name`` alone: its
    per-seed OSCR area there (``compare_models``) and the paired bootstrap of that set's samples over
    the run's ``models`` (their stored scores: ``scores_of``); and, by row, its per-seed linear and
    log-FPR areas there (``{"oscr": [...], "oscr_log": [...]}``)."""
    per_seed = {(r["approach"], r["detector"]): (r["seed_ids"], r["test"][name]["per_seed"])
                for r in comparison.rows if name in r["test"]}
    rows, areas = [], {}
    for row in result["rows"]:
        seeds, values = per_seed.get((row["approach"], row["detector"]), (None, None))
        if seeds is not None and list(seeds) != list(row["seeds"]):
            raise ValueError(f"{row['row']}: seeds {seeds} scored, {row['seeds']} reported")
        areas[row["row"]] = {key: None if values is None or values.get(key) is None else [float(v) for v in values[key]]
                             for key in AREAS}
        rows.append(dict(row, mean_oscr_per_seed=areas[row["row"]]["oscr"],
                         mean_oscr_log_per_seed=areas[row["row"]]["oscr_log"]))
    tests = compare_families(rows, result["reference"], sample_replicates(models, scores_of, sets=[name]))
    return tests, areas


def log_area_se(models, scores_of, name: str, reference: str, detector: str = "softmax") -> Dict[str, float]:
    """Per approach, the test samples' standard error of its mean log-FPR OSCR area minus
    ``reference``'s, each with ``detector``, on set ``name``: the benchmark's paired bootstrap
    (``sample_replicates``: the same resamples of the knowns and of ``name`` as its linear area's,
    each resample's area read from the lowest FPR the set resolves)."""
    log = sample_replicates(models, scores_of, sets=[name]).log or {}
    theirs = log.get((reference, detector), {})
    return {approach: resampled_se(np.stack([mine[s] for s in sorted(mine)]), np.stack([theirs[s] for s in sorted(mine)]))
            for (approach, scored), mine in log.items()
            if scored == detector and approach != reference and sorted(mine) == sorted(theirs)}


def _area(areas: Dict[str, Dict], key: str) -> Dict[str, List]:
    return {row: values[key] for row, values in areas.items()}


def _kept(tests: Dict[str, List[Dict]]) -> Dict[str, List[Dict]]:
    return {family: [{key: t[key] for key in KEPT} for t in family_tests] for family, family_tests in tests.items()}


def read(run_dir: Path, name: str, out: Path) -> None:
    result = json.loads((run_dir / "benchmark.json").read_text())
    ranked = ranked_sets(list(result["test_sets"]))
    if len(ranked) != 1:
        sys.exit(f"{run_dir}: ranked on {len(ranked)} sets ({', '.join(ranked)}); this reading compares one near "
                 f"set with one added set")
    (published,) = ranked  # the protocol's one near D_a set
    approaches = sorted({r["approach"] for r in result["rows"]})
    comparison = compare_models(run_dir, approaches=approaches)
    if name not in comparison.test_sets:
        sys.exit(f"{run_dir}: no unknown set {name!r}; score it first (agnostophobia evaluate RUN --unknowns ...)")
    models = [m for m in check_run(run_dir, "benchmark").models if m[1] in approaches]
    scores_of = run_scores(run_dir)
    again, published_areas = tests_on(result, comparison, models, scores_of, published)
    for family, tests in result["tests"].items():
        if json.dumps(_kept({family: again[family]})) != json.dumps(_kept({family: tests})):
            sys.exit(f"{run_dir}: the {family} family read on {published} does not repeat benchmark.json; "
                     f"nothing written")
    added, added_areas = tests_on(result, comparison, models, scores_of, name)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    record = {"run": run_dir.name, "sets": {published: comparison.test_sets[published], name: comparison.test_sets[name]},
              "published_set": published, "added_set": name, "reference": result["reference"],
              "margin": result["margin"], "alpha": result["alpha"], "seeds": result["seeds"],
              "tests": {published: _kept(again), name: _kept(added)},
              "oscr_per_seed": {published: _area(published_areas, "oscr"), name: _area(added_areas, "oscr")},
              "oscr_log_per_seed": {published: _area(published_areas, "oscr_log"), name: _area(added_areas, "oscr_log")},
              "oscr_log_se_samples": {s: log_area_se(models, scores_of, s, result["reference"]) for s in (published, name)},
              "meta": {"commit": commit, "processor": cpu_model(), "torch": torch.__version__,
                       "read": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}}
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(out)
    print(f"written: {out}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    images = commands.add_parser("images", help="write a split's unused near training images (.npz)")
    images.add_argument("out", type=Path)
    images.add_argument("--data-dir", default=None)
    images.add_argument("--protocol", default="cifar10-split", choices=sorted(CIFAR10_PARTITIONS))
    reading = commands.add_parser("read", help="test a run's rows on the added set and on the published one")
    reading.add_argument("run", type=Path)
    reading.add_argument("set", help="the added set's name in the run (the .npz file's stem)")
    reading.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "images":
        np.savez_compressed(args.out, images=unused_near_images(args.data_dir, args.protocol))
        print(f"written: {args.out}")
    else:
        read(args.run, args.set, args.out)


if __name__ == "__main__":
    main()
