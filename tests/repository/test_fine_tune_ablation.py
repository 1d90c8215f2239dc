"""The fine-tune ablations' validation table (benchmarks/fine_tune_ablation.py): each network's row
reads its validation outputs only, scores them with its paper's detector, and agrees with
scikit-learn's AUROC (the knowns positive, scored by their maximum softmax probability)."""
import importlib.util

import numpy as np
import pytest
from repo_paths import REPO
from sklearn.metrics import roc_auc_score


def _script():
    spec = importlib.util.spec_from_file_location("fine_tune_ablation", REPO / "benchmarks" / "fine_tune_ablation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_row_reads_the_validation_outputs_with_the_papers_detector(tmp_path):
    script = _script()
    rng = np.random.default_rng(0)
    labels = np.r_[rng.integers(0, 6, 300), np.full(200, -1)]
    logits = rng.normal(size=(500, 6)) + 3 * np.eye(6)[np.clip(labels, 0, None)] * (labels >= 0)[:, None]
    folder = tmp_path / "run" / "seed0" / "softmax"
    folder.mkdir(parents=True)
    np.savez(folder / "val_outputs.npz", val__logits=logits, val__labels=labels)
    (tmp_path / "run" / "seed0" / "softmax" / "outputs.npz").write_bytes(b"not read")  # the test outputs
    assert list(script.networks(tmp_path / "run")) == [(tmp_path / "run" / "seed0", "softmax")]
    cells = [c.strip() for c in script.row(tmp_path / "run" / "seed0", "softmax").strip("|").split("|")]
    known = labels >= 0
    accuracy = (logits[known].argmax(1) == labels[known]).mean()
    msp = np.exp(logits - logits.max(1, keepdims=True))
    msp = (msp / msp.sum(1, keepdims=True)).max(1)
    assert cells[:5] == ["run", "seed0", "softmax", f"{accuracy:.4f}", "softmax"]
    # scikit-learn counts every known as a positive; ours too (AUROC does not ask for a correct class)
    assert float(cells[5]) == pytest.approx(roc_auc_score(known, msp), abs=1e-4)
    assert 0 < float(cells[6]) <= accuracy
