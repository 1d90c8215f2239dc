"""
Export a model and run the file in onnxruntime
==============================================

``agnostophobia export RUN --format onnx`` writes one file holding the network, the
detector's score as torch operations and the threshold chosen on validation data. The file
runs without this package: here in onnxruntime, and it decides as ``predict`` does. Any run
of ``train`` or ``reproduce`` exports the same way.
"""
# %%
# A small run to export
# ---------------------
# The glyphs of the folder example (bars and boxes known, diagonals negative), a few
# seconds of training of a small MLP.
import json
import shutil
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import onnxruntime
import yaml
from PIL import Image

from agnostophobia.cli import run_command
from agnostophobia.data import draw_glyph, make_glyph_folders
from agnostophobia.deploy import OpenSetClassifier

KNOWN, NEGATIVE = ["hbar", "vbar", "box"], ["diag"]
work = Path(tempfile.mkdtemp(prefix="agnostophobia-export-"))


protocol = make_glyph_folders(work / "images", known=KNOWN, negative=NEGATIVE, unknown=["dots"], seed=0)
(work / "experiment.yaml").write_text(yaml.safe_dump({
    "name": "shapes",
    "protocol": protocol,
    "model": "mlp", "model_kwargs": {"hidden": [64, 32]}, "approaches": ["entropic"],
    "epochs": 6, "batch_size": 16, "lr": 0.003, "tensorboard": False, "progress": False, "cpu_threads": 2,
}, sort_keys=False))
run_command("train", work / "experiment.yaml", "--out", work / "run", "--no-progress")

# %%
# Export to ONNX
# --------------
# ``--fpr 0.2`` calibrates the threshold on the validation data first (at most 20 % of the
# validation negatives accepted) and puts it in the file with the class names.
onnx_file = work / "shapes.onnx"
run_command("export", work / "run", "--format", "onnx", "--out", onnx_file, "--fpr", "0.2")
print(f"{onnx_file.name}: {onnx_file.stat().st_size:,} bytes")

# %%
# The file alone, in onnxruntime
# ------------------------------
# Float (N, 1, 28, 28) in [0, 1] in, (labels, scores) out; -1 = unknown. The class names
# and the threshold travel in the file's metadata.
rng = np.random.default_rng(2)
drawn = ["hbar", "vbar", "box", "dots"]
x = np.stack([draw_glyph(s, rng) for s in drawn])[:, None].astype(np.float32) / 255
session = onnxruntime.InferenceSession(str(onnx_file))
labels, scores = session.run(["labels", "scores"], {"images": x})
info = json.loads(session.get_modelmeta().custom_metadata_map["agnostophobia.json"])
names = [info["class_names"][c] if c >= 0 else "unknown" for c in labels]
print(f"threshold {info['threshold']:.6f}")

# %%
# The same decisions through the package
# --------------------------------------
# ``OpenSetClassifier`` reads the run directory and its calibration: the exported file and
# ``predict`` agree image by image.
clf = OpenSetClassifier.from_run(work / "run")
ours = clf.predict(x)
print(f"{'drawn':8} {'onnxruntime':12} {'score':>9}  predict")
for shape, name, score, label in zip(drawn, names, scores, ours):
    print(f"{shape:8} {name:12} {score:9.6f}  {clf.class_names[label] if label >= 0 else 'unknown'}")
assert list(labels) == list(ours), "the exported file and predict disagree"

fig, axes = plt.subplots(1, len(drawn), figsize=(6, 1.9))
for ax, image, name, score in zip(axes, x[:, 0], names, scores):
    ax.imshow(image, cmap="gray")
    ax.set_title(f"{name}\nscore {score:.2f}", fontsize=9)
    ax.axis("off")
fig.suptitle(f"onnxruntime's answers (threshold {info['threshold']:.2f})", fontsize=10)
fig.tight_layout()
shutil.rmtree(work)  # the temporary folder
