"""
Export a model and run the file in onnxruntime
==============================================

``agnostophobia export RUN --format onnx`` writes one file holding the network, the
detector's score as torch operations and the threshold chosen on validation data. The file
runs without this package: here in onnxruntime, and it decides as ``predict`` does. The run
is the small one of the folder example (generated images, a few seconds of training); any
run of ``train`` or ``reproduce`` exports the same way.
"""
# %%
import argparse
import importlib.util
import json
import tempfile
from pathlib import Path

import numpy as np

from agnostophobia.cli import main


def agnostophobia(argv) -> None:
    """``agnostophobia ARGV...`` in this process; a failed command stops the example."""
    if main([str(a) for a in argv]) != 0:
        raise SystemExit(f"agnostophobia {' '.join(map(str, argv))} failed")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="train a tiny run, export it to ONNX, run it in onnxruntime")
    p.add_argument("--per-class", type=int, default=40, help="training images per class")
    p.add_argument("--out", type=Path, help="working folder (default: a temporary one)")
    return p.parse_args(argv)


def folder_example():
    """The generator of plot_folder_to_deployed_model.py, beside this file (the gallery runs the
    examples in their folder and defines no ``__file__``)."""
    here = Path(globals().get("__file__", "plot_export_onnxruntime.py")).resolve().parent
    path = here / "plot_folder_to_deployed_model.py"
    spec = importlib.util.spec_from_file_location("plot_folder_to_deployed_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(args) -> None:
    if args.out is not None:
        return run_in(args, args.out)
    with tempfile.TemporaryDirectory(prefix="agnostophobia-export-") as work:  # removed afterwards
        return run_in(args, Path(work))


def run_in(args, work: Path) -> None:
    import onnxruntime

    from agnostophobia.deploy import OpenSetClassifier

    shapes = folder_example()
    config = shapes.write_protocol(work / "protocol", args.per_class)
    run_dir, onnx_file = work / "run", work / "shapes.onnx"
    agnostophobia(["train", str(config), "--out", str(run_dir), "--no-progress"])
    agnostophobia(["export", str(run_dir), "--format", "onnx", "--out", str(onnx_file), "--fpr", "0.2"])

    # The file alone: float (N, 1, 28, 28) in [0, 1] in, (labels, scores) out; -1 = unknown.
    rng = np.random.default_rng(2)
    images = np.stack([shapes.draw(s, rng) for s in ("hbar", "vbar", "box", "dots")])
    x = images[:, None].astype(np.float32) / 255
    session = onnxruntime.InferenceSession(str(onnx_file))
    labels, scores = session.run(["labels", "scores"], {"images": x})
    info = json.loads(session.get_modelmeta().custom_metadata_map["agnostophobia.json"])
    names = [info["class_names"][c] if c >= 0 else "unknown" for c in labels]

    # The same decisions from the run directory, through the package
    clf = OpenSetClassifier.from_run(run_dir)
    ours = clf.predict(x)
    print(f"threshold {info['threshold']:.6f}, file size {onnx_file.stat().st_size:,} bytes")
    print(f"{'drawn':8} {'onnxruntime':12} {'score':>9}  predict")
    for drawn, name, score, label in zip(("hbar", "vbar", "box", "dots"), names, scores, ours):
        print(f"{drawn:8} {name:12} {score:9.6f}  {clf.class_names[label] if label >= 0 else 'unknown'}")
    assert list(labels) == list(ours), "the exported file and predict disagree"


# %%
# Train, export, run
# ------------------
if __name__ == "__main__":
    run(parse_args())
