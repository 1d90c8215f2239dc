"""CPU time of the refusals that need no model and no image, against ``python -c "import torch"``
(issue 54, item 6: each at most 0.5x).

    python benchmarks/bench_refusals.py [--repeats 3] [--target 0.5]

Each case is a fresh process of this interpreter running ``python -m agnostophobia ...`` on
inputs made in a temporary folder (a run folder that is missing, a run holding a config but
asked for an approach it does not have, ``predict`` of a missing image, ``train`` of an
image-folder experiment with a class-name typo or a missing root). The CPU time (user + system)
of the process and its children is read with ``resource.getrusage(RUSAGE_CHILDREN)`` around
each run, so that a busy machine lengthens no figure; each case is the median of ``--repeats``
runs, interleaved with ``import torch``. Prints each case's ratio; exits with status 1 if any
exceeds ``--target`` or if a case is not refused with exit status 1 and one line.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src"  # this tree's package, not an installed one

EXPERIMENT = """name: mine
protocol: {{type: imagefolder, root: {root}, image_size: 32, channels: 3, known: [cat, dgo], unknown: [bird]}}
model: small-cnn
approaches: [softmax]
"""


def cpu_seconds(command, env) -> tuple:
    """(CPU seconds, exit status, stderr lines) of ``command`` run to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used, done.returncode, done.stderr.strip().splitlines()


def cases(folder: Path) -> dict:
    """name -> argv after ``python -m agnostophobia``, each a refusal."""
    (folder / "imgs" / "cat").mkdir(parents=True)
    (folder / "imgs" / "dog").mkdir()
    (folder / "run" / "seed0" / "softmax").mkdir(parents=True)
    (folder / "run" / "config.yaml").write_text("approaches: [softmax, entropic]\n")
    (folder / "typo.yaml").write_text(EXPERIMENT.format(root=folder / "imgs"))
    (folder / "no-root.yaml").write_text(EXPERIMENT.format(root=folder / "missing"))
    return {
        "predict: no such run": ["predict", folder / "nowhere", folder / "digit.png"],
        "predict: no such image": ["predict", folder / "run", folder / "digit.png"],
        "calibrate: approach typo": ["calibrate", folder / "run", "--fpr", "0.1", "--approach", "entropc"],
        "export: no such run": ["export", folder / "nowhere", "--out", folder / "m.pt2"],
        "train: class-name typo": ["train", folder / "typo.yaml", "--out", folder / "out"],
        "train: no such root": ["train", folder / "no-root.yaml", "--out", folder / "out"],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--target", type=float, default=0.5, help="largest acceptable ratio")
    args = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE), os.environ.get("PYTHONPATH")]))}
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        commands = cases(Path(tmp))
        torch_times, times = [], {name: [] for name in commands}
        for _ in range(args.repeats):
            torch_times.append(cpu_seconds([sys.executable, "-c", "import torch"], env)[0])
            for name, command in commands.items():
                used, code, err = cpu_seconds([sys.executable, "-m", "agnostophobia", *map(str, command)], env)
                if code != 1 or len(err) != 1:
                    print(f"{name}: not refused in one line (exit {code}): {err[-3:]}")
                    failed = True
                times[name].append(used)
    torch_cpu = statistics.median(torch_times)
    print(f"python -c 'import torch': {torch_cpu:.2f} s CPU (median of {args.repeats})")
    for name, values in times.items():
        ratio = statistics.median(values) / torch_cpu
        failed |= ratio > args.target
        print(f"{name:28s} {statistics.median(values):.2f} s CPU  {ratio:.2f}x import torch")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
