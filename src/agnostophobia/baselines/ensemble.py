r"""Adversarially trained deep ensemble of MLPs (Lakshminarayanan et al., NIPS 2017), the
baseline of the paper's Fig. 3b and 3c (``agnostophobia reproduce ensemble``).

**Method.** ``M`` MLPs ``784 -> 200 -> 200 -> 200 -> 10`` (ReLU) are trained on MNIST, each
from its own random initialisation and with its own data order, on the negative
log-likelihood (a proper scoring rule) plus the NLL of a fast-gradient-sign adversarial
example made from the current weights at every step:

.. math::

    x' = \mathrm{clip}_{[0,1]}\bigl(x + \epsilon\,\mathrm{sign}\,\nabla_x \ell(\theta, x, y)\bigr),
    \qquad \mathcal{L} = \ell(\theta, x, y) + \ell(\theta, x', y),

with ``epsilon`` = 1 % of the input range (inputs are ``x / 255``, so 0.01). The ensemble's
probabilities are the mean of the members' softmax outputs. Inputs get the LeNet++
preprocessing (``data.preprocess.prepare_images``: white glyph on black, 28x28), scaled to [0, 1] and
flattened.

**Evaluation (paper Sec. 4.3).** MNIST test are the knowns D_c, notMNIST (18,724) the
unknowns D_a. The "squared MLP" scores are the ensemble's probabilities squared
(element-wise, not renormalised): a monotonic rescaling, so their OSCR curve and every
CCR@FPR are identical to the ensemble's (Fig. 3c), while the precision- and
accuracy-vs-confidence curves move (Fig. 3b) -- the paper's "prone to scaling errors"
argument. When a LeNet++ run is given, its softmax, entropic and objectosphere models are
drawn beside the ensemble from their stored outputs.

**Run directory** (``runs/ensemble-BUDGET`` by default)::

    OUT/config.yaml                         resolved configuration and budget
    OUT/seed<k>/member<m>/last.pt           model + Adam state after the last finished epoch
    OUT/seed<k>/member<m>/probabilities.npz the member's softmax on the test sets (= finished)
    OUT/seed<k>/ensemble_probabilities.npz  the ensemble mean: <split>__probs float64 (N, 10),
                                            <split>__labels int64 (N,), splits "known" and
                                            "notmnist" (labels -1)
    OUT/timings.json, metrics.json, report.md, figures/fig3b_confidence.png, figures/fig3c_oscr.png

**Resumption.** A call on an existing ``OUT`` continues it: a member whose
``probabilities.npz`` exists is skipped, an unfinished member continues after its last
finished epoch (``last.pt``, written atomically after every epoch). The data order of an
epoch depends only on (member seed, epoch) and FGSM has no randomness, so on the CPU a
resumed member ends with exactly the weights of an uninterrupted one. A call whose
training settings differ from those stored in ``OUT`` stops with a ConfigError instead of
mixing two runs; ``--seeds`` may grow an existing run.

**The cpu budget** (``configs/ensemble.yaml``) is sized from measured throughput, see the
comment there.
"""
from __future__ import annotations

import dataclasses
import json
import platform
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
import yaml
from torch import nn

from agnostophobia.data import DATASETS, load_dataset, purpose_rng, stratified_subset
from agnostophobia.data.preprocess import LENET_INPUT, prepare_images
from agnostophobia.errors import ConfigError
from agnostophobia.experiments.evaluation import FPR_KEYS, FPR_TARGETS, aggregate_seeds, finite_or_none
from agnostophobia.training.outputs import iter_run_outputs
from agnostophobia.experiments.report import format_value, json_default
from agnostophobia.metrics import (accuracy_vs_confidence, auroc, ccr_at_fpr, fpr_at_tpr, oscr,
                                   precision_vs_confidence)
from agnostophobia.detectors import softmax_scores
from agnostophobia._atomic import atomic_write
from agnostophobia.training.config import apply_overrides
from agnostophobia.training.checkpoint import load_checkpoint, save_checkpoint, seed_everything
from agnostophobia.training.trainer import epoch_order, resolve_device

CONFIG_PATH = Path(__file__).resolve().parent.parent / "configs" / "ensemble.yaml"
BUDGETS = ("smoke", "cpu", "paper")
#: The unknown set of Fig. 3 and the name of its split.
UNKNOWN = "notmnist"
#: LeNet++ models drawn beside the ensemble (each scored by its max softmax, as in Fig. 3).
LENET_APPROACHES = ("softmax", "entropic", "objectosphere")
#: Thresholds at which the precision / accuracy-vs-confidence curves are stored and drawn.
CONFIDENCE_GRID = np.linspace(0.0, 1.0, 201)
#: Evaluation rows of the ensemble itself: (row name, display name).
ENSEMBLE_ROWS = (("ensemble", "MLP ensemble"), ("ensemble-squared", "Squared MLP ensemble"))
# Config keys that may change between a run and its continuation without changing a result.
_RESUME_FREE_KEYS = ("seeds", "device", "eval_batch_size", "cpu_threads")


# --------------------------------------------------------------------------- config

@dataclass
class EnsembleConfig:
    """Every setting of an ensemble reproduction (``configs/ensemble.yaml``)."""

    name: str = "ensemble"
    members: int = 5
    hidden: List[int] = field(default_factory=lambda: [200, 200, 200])
    batch_norm: bool = False
    adversarial: bool = True
    epsilon: float = 0.01
    optimizer: str = "adam"
    lr: float = 0.001
    weight_decay: float = 0.0
    batch_size: int = 100
    epochs: int = 40
    train_samples: Optional[int] = None
    test_samples: Optional[int] = None
    seeds: int = 1
    seed: int = 0
    eval_batch_size: int = 4096
    device: str = "auto"
    cpu_threads: Optional[int] = 1

    def validate(self) -> "EnsembleConfig":
        def need(cond: bool, key: str, what: str):
            if not cond:
                raise ConfigError(f"config key {key!r}: {what}, got {getattr(self, key)!r}")

        def is_int(value) -> bool:
            return isinstance(value, int) and not isinstance(value, bool)

        need(isinstance(self.name, str) and bool(self.name), "name", "must be a non-empty string")
        for key in ("members", "batch_size", "epochs", "seeds", "eval_batch_size"):
            need(is_int(getattr(self, key)) and getattr(self, key) >= 1, key, "must be an integer >= 1")
        need(self.members < 1000, "members", "must be < 1000 (member seeds are seed + 1000 k + m)")
        need(is_int(self.seed) and self.seed >= 0, "seed", "must be an integer >= 0")
        need(isinstance(self.hidden, list) and bool(self.hidden)
             and all(is_int(h) and h >= 1 for h in self.hidden), "hidden",
             "must be a non-empty list of layer widths >= 1")
        for key in ("batch_norm", "adversarial"):
            need(isinstance(getattr(self, key), bool), key, "must be true or false")
        for key in ("epsilon", "lr", "weight_decay"):
            value = getattr(self, key)
            need(isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)
                 and value >= 0, key, "must be a number >= 0")
        need(self.lr > 0, "lr", "must be > 0")
        need(self.epsilon <= 1, "epsilon", "must be <= 1 (inputs are in [0, 1])")
        need(self.optimizer == "adam", "optimizer", "must be 'adam' (Lakshminarayanan et al.)")
        for key in ("train_samples", "test_samples"):
            value = getattr(self, key)
            need(value is None or is_int(value) and value >= 1, key, "must be null or an integer >= 1")
        need(isinstance(self.device, str), "device", "must be auto, cpu, cuda or cuda:N")
        need(self.cpu_threads is None or is_int(self.cpu_threads) and self.cpu_threads >= 1, "cpu_threads",
             "must be null (PyTorch's default) or an integer >= 1")
        return self

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    def training_settings(self) -> Dict[str, Any]:
        """The settings a stored run must share with its continuation."""
        return {k: v for k, v in self.to_dict().items() if k not in _RESUME_FREE_KEYS}


def parse_config(data: Any, where: str = "ensemble config") -> Tuple[EnsembleConfig, Dict[str, Dict[str, Any]]]:
    """The top-level configuration and the budgets' overrides, all checked (fail early)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: the top level must be a mapping, got {type(data).__name__}")
    data = dict(data)
    budgets = data.pop("budgets", {}) or {}
    if not isinstance(budgets, dict):
        raise ConfigError(f"config key 'budgets': must be a mapping of budget name to overrides, got {budgets!r}")
    base = apply_overrides(EnsembleConfig(), data, "")
    for budget, overrides in budgets.items():
        if budget not in BUDGETS:
            raise ConfigError(f"unknown config key 'budgets.{budget}'; known budgets: {list(BUDGETS)}")
        if not isinstance(overrides, dict):
            raise ConfigError(f"config key 'budgets.{budget}': must be a mapping, got {overrides!r}")
        apply_overrides(base, overrides, f"budgets.{budget}.")
    return base, budgets


def load_config(budget: Optional[str] = None, path=None) -> EnsembleConfig:
    """``configs/ensemble.yaml`` (or ``path``) with ``budget``'s overrides applied."""
    path = Path(path) if path is not None else CONFIG_PATH
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"config {path}: not valid YAML: {exc}") from None
    base, budgets = parse_config(data, f"config {path}")
    if budget is None:
        return base
    if budget not in budgets:
        raise ConfigError(f"budget {budget!r} is not defined in {path}; defined: {sorted(budgets)}")
    return apply_overrides(base, budgets[budget], f"budgets.{budget}.")


@contextmanager
def cpu_threads(device: torch.device, threads: Optional[int]):
    """Run the block with ``threads`` intra-op threads on the CPU (restored afterwards).

    The members' matrix products are small (batch 100 x 784 x 200): a second thread gains
    little, and next to another busy process two threads slowed training 160-fold on the
    2-core machine (93 instead of 14,800 images/s), so the config's default is one.
    """
    if torch.device(device).type != "cpu" or threads is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def member_seed(cfg: EnsembleConfig, ensemble: int, member: int) -> int:
    """Seed of member ``member`` of the ``ensemble``-th independent ensemble."""
    return cfg.seed + 1000 * ensemble + member


# ---------------------------------------------------------------------------- model

def build_mlp(hidden: Sequence[int] = (200, 200, 200), num_classes: int = 10, input_dim: int = 784,
              batch_norm: bool = False) -> nn.Sequential:
    """The members' MLP: flatten, ``Linear -> [BatchNorm1d] -> ReLU`` per hidden layer, linear logits.

    PyTorch's default initialisation; call :func:`seed_everything` first for a seeded one.
    """
    layers: List[nn.Module] = [nn.Flatten()]
    width = input_dim
    for h in hidden:
        layers.append(nn.Linear(width, h))
        if batch_norm:
            layers.append(nn.BatchNorm1d(h))
        layers.append(nn.ReLU())
        width = h
    layers.append(nn.Linear(width, num_classes))
    return nn.Sequential(*layers)


def _fgsm_step(x: torch.Tensor, grad: torch.Tensor, epsilon: float) -> torch.Tensor:
    return (x.detach() + epsilon * grad.sign()).clamp_(0.0, 1.0)


def fgsm(model: nn.Module, x: torch.Tensor, y: torch.Tensor, epsilon: float) -> torch.Tensor:
    r"""Fast gradient sign example :math:`\mathrm{clip}_{[0,1]}(x + \epsilon\,\mathrm{sign}\,\nabla_x
    \mathrm{NLL})` (Goodfellow et al. 2015), in the model's current mode.

    The gradient is that of the batch-mean NLL; its sign per pixel equals that of each
    sample's own NLL (a positive factor 1/B) unless the model mixes samples (batch norm in
    training mode). Pixels with a zero gradient do not move. Parameter gradients are left
    untouched.
    """
    x = x.detach().requires_grad_(True)
    loss = F.cross_entropy(model(x), y)
    (grad,) = torch.autograd.grad(loss, x)
    return _fgsm_step(x, grad, epsilon)


def adversarial_nll(model: nn.Module, x: torch.Tensor, y: torch.Tensor, epsilon: float):
    """Training loss of Lakshminarayanan et al.: ``NLL(x) + NLL(x_adv)``, ``x_adv`` from :func:`fgsm`.

    The clean forward pass is shared between the loss and the input gradient. Returns
    ``(loss, nll_clean, nll_adversarial, x_adv, clean_logits)``; backpropagate ``loss``.
    """
    x = x.detach().requires_grad_(True)
    logits = model(x)
    clean = F.cross_entropy(logits, y)
    (grad,) = torch.autograd.grad(clean, x, retain_graph=True)
    x_adv = _fgsm_step(x, grad, epsilon)
    adversarial = F.cross_entropy(model(x_adv), y)
    return clean + adversarial, clean, adversarial, x_adv, logits


# ------------------------------------------------------------------------- inference

def _as_float_input(images: np.ndarray, device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(images)).to(device).float().div_(255.0)


def member_probabilities(model: nn.Module, images: np.ndarray, batch_size: int = 4096,
                         device="cpu") -> np.ndarray:
    """Softmax (float64, (N, C)) of one member on uint8 images (N, 784) or (N, 1, 28, 28)."""
    model.eval()
    logits = []
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            logits.append(model(_as_float_input(images[start:start + batch_size], device)).float().cpu())
    return softmax_scores(torch.cat(logits)) if logits else np.empty((0, 10))


def average_probabilities(member_probs: Sequence[np.ndarray]) -> np.ndarray:
    """The ensemble's prediction: the mean of the members' probabilities, (N, C)."""
    if len(member_probs) == 0:
        raise ValueError("an ensemble needs at least one member")
    return np.mean(np.stack([np.asarray(p, dtype=np.float64) for p in member_probs]), axis=0)


def ensemble_probabilities(models: Sequence[nn.Module], images: np.ndarray, batch_size: int = 4096,
                           device="cpu") -> Tuple[np.ndarray, np.ndarray]:
    """``(mean, members)``: the averaged softmax (N, C) and each member's softmax (M, N, C)."""
    members = np.stack([member_probabilities(m, images, batch_size, device) for m in models])
    return average_probabilities(members), members


def squared_scores(probs: np.ndarray) -> np.ndarray:
    """The paper's "squared MLP": the probabilities squared element-wise (not renormalised)."""
    return np.square(np.asarray(probs, dtype=np.float64))


# ------------------------------------------------------------------------------ data

@dataclass
class EnsembleData:
    """Flattened uint8 inputs (N, 784): MNIST training set and the two test sets."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test: Dict[str, Tuple[np.ndarray, np.ndarray]]   # "known": labels 0..9; "notmnist": labels -1
    notes: List[str]


def _flat(split, name: str) -> np.ndarray:
    # the LeNet++ protocol's preparation (one path for every model), then flattened for the MLPs
    images = prepare_images(split.images, LENET_INPUT, name=name, kind=DATASETS.get(split.dataset).kind)
    return np.ascontiguousarray(images.reshape(len(images), -1))


def load_data(cfg: EnsembleConfig, data_dir=None, seed: int = 0) -> EnsembleData:
    """MNIST train (optionally a class-stratified subset), MNIST test and notMNIST (capped per set)."""
    notes: List[str] = []
    train = load_dataset("mnist", "train", data_dir)
    known = load_dataset("mnist", "test", data_dir)
    unknown = load_dataset(UNKNOWN, "test", data_dir)
    for ds in (train, known, unknown):
        notes += [n for n in ds.notes if n not in notes]

    def pick(labels, limit, purpose, what):
        idx = stratified_subset(labels, limit, purpose_rng(seed, f"ensemble/{purpose}"))
        if len(idx) < len(labels):
            notes.append(f"{what}: subsampled {len(labels):,} -> {len(idx):,} (class-stratified, seed {seed})")
        return idx

    tr = pick(train.labels, cfg.train_samples, "train", "MNIST train")
    kn = pick(known.labels, cfg.test_samples, "known", "MNIST test (D_c)")
    un = pick(unknown.labels, cfg.test_samples, "unknown", "notMNIST (D_a)")
    return EnsembleData(
        train_images=_flat(train, "mnist train")[tr], train_labels=train.labels[tr].astype(np.int64),
        test={"known": (_flat(known, "mnist test")[kn], known.labels[kn].astype(np.int64)),
              UNKNOWN: (_flat(unknown, "notmnist")[un], np.full(len(un), -1, dtype=np.int64))},
        notes=notes)


# -------------------------------------------------------------------------- training

def _settings(cfg: EnsembleConfig, seed: int) -> Dict[str, Any]:
    return {**cfg.training_settings(), "member_seed": seed}


def train_member(cfg: EnsembleConfig, seed: int, images: np.ndarray, labels: np.ndarray, run_dir: Path,
                 device="cpu", progress: bool = False, log: Callable[[str], None] = print,
                 ) -> Tuple[nn.Module, List[Dict[str, float]]]:
    """Train (or continue) one member; ``run_dir/last.pt`` is rewritten atomically after every epoch.

    ``images`` are uint8 (N, 784), ``labels`` 0..9. Runs with ``cfg.cpu_threads`` threads on
    the CPU. Returns the model and its per-epoch history (loss, NLL on clean and adversarial
    inputs, training accuracy on the clean inputs, seconds and images/s).
    """
    with cpu_threads(torch.device(device), cfg.cpu_threads):
        return _train_member(cfg, seed, images, labels, Path(run_dir), torch.device(device), progress, log)


def _train_member(cfg, seed, images, labels, run_dir: Path, device: torch.device, progress: bool, log):
    from tqdm.auto import tqdm

    checkpoint = run_dir / "last.pt"
    settings = _settings(cfg, seed)
    seed_everything(seed)
    model = build_mlp(cfg.hidden, 10, images.shape[1], cfg.batch_norm).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    start, history = 0, []
    if checkpoint.exists():
        state = load_checkpoint(checkpoint, map_location=device)
        if state.get("settings") != settings:
            raise ConfigError(f"{checkpoint} was trained with other settings "
                              f"({_diff(state.get('settings'), settings)}); choose another --out")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start, history = int(state["epoch"]), list(state["history"])
        if start < cfg.epochs:
            log(f"    resuming after epoch {start}/{cfg.epochs}")
    x_all = torch.from_numpy(np.ascontiguousarray(images)).to(device)
    y_all = torch.from_numpy(np.asarray(labels, dtype=np.int64)).to(device)
    n = len(y_all)
    for epoch in range(start, cfg.epochs):
        began = time.perf_counter()
        order = epoch_order(n, seed, epoch).to(device)
        model.train()
        total = clean_sum = adv_sum = correct = seen = 0.0
        bar = tqdm(total=n, disable=not progress, leave=False, unit="img",
                   desc=f"    epoch {epoch + 1}/{cfg.epochs}")
        for first in range(0, n, cfg.batch_size):
            idx = order[first:first + cfg.batch_size]
            if cfg.batch_norm and len(idx) < 2:
                continue  # batch norm cannot train on a batch of one
            x = x_all[idx].float().div_(255.0)
            y = y_all[idx]
            if cfg.adversarial:
                loss, clean, adv, _, logits = adversarial_nll(model, x, y, cfg.epsilon)
            else:
                logits = model(x)
                loss = clean = F.cross_entropy(logits, y)
                adv = torch.full((), float("nan"))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            b = len(idx)
            total += float(loss.detach()) * b
            clean_sum += float(clean.detach()) * b
            adv_sum += float(adv.detach()) * b
            correct += float((logits.detach().argmax(1) == y).sum())
            seen += b
            bar.update(b)
        bar.close()
        seconds = time.perf_counter() - began
        history.append({"epoch": epoch + 1, "loss": total / seen, "nll_clean": clean_sum / seen,
                        "nll_adversarial": adv_sum / seen if cfg.adversarial else None,
                        "train_accuracy": correct / seen, "seconds": seconds, "images_per_s": seen / seconds})
        save_checkpoint(checkpoint, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                     "epoch": epoch + 1, "settings": settings, "history": history})
        log(f"    epoch {epoch + 1}/{cfg.epochs}: loss {total / seen:.4f}, train accuracy {correct / seen:.4f}, "
            f"{seen / seconds:,.0f} images/s")
    return model, history


def _diff(old: Optional[Dict], new: Dict) -> str:
    if not isinstance(old, dict):
        return "no settings recorded"
    keys = sorted(k for k in set(old) | set(new) if old.get(k, "<absent>") != new.get(k, "<absent>"))
    return ", ".join(f"{k}: {old.get(k, '<absent>')!r} -> {new.get(k, '<absent>')!r}" for k in keys)


def save_probabilities(path: Path, splits: Dict[str, Tuple[np.ndarray, np.ndarray]]) -> None:
    """``{split: (probs (N, C), labels (N,))}`` as ``<split>__probs`` / ``<split>__labels``, atomically."""
    arrays = {}
    for split, (probs, labels) in splits.items():
        arrays[f"{split}__probs"] = np.asarray(probs, dtype=np.float64)
        arrays[f"{split}__labels"] = np.asarray(labels, dtype=np.int64)

    def write(tmp):
        with open(tmp, "wb") as handle:
            np.savez(handle, **arrays)

    atomic_write(Path(path), write)


def load_probabilities(path: Path) -> Dict[str, Tuple[np.ndarray, np.ndarray]]:
    """Read :func:`save_probabilities`'s file: ``{split: (probs, labels)}``."""
    with np.load(path) as data:
        splits = sorted({key.split("__", 1)[0] for key in data.files})
        return {s: (data[f"{s}__probs"], data[f"{s}__labels"]) for s in splits}


# ------------------------------------------------------------------------ evaluation

def result_row(approach: str, model: str, scores: np.ndarray, labels: np.ndarray, seed: int) -> Dict[str, Any]:
    """CCR at FPR 1e-4..1e-1 (null where |D_a| is too small), closed-set accuracy, AUROC, FPR95."""
    known = labels >= 0
    ccr = ccr_at_fpr(scores, labels, FPR_TARGETS)
    confidence = scores.max(axis=1)
    return {"approach": approach, "model": model, "unknowns": UNKNOWN, "seed": seed,
            "num_known": int(known.sum()), "num_unknown": int((~known).sum()),
            "ccr_at_fpr": {k: finite_or_none(v) for k, v in zip(FPR_KEYS, ccr)},
            "closed_set_accuracy": float((scores[known].argmax(1) == labels[known]).mean()),
            "auroc": float(auroc(confidence, labels)),
            "fpr_at_95tpr": float(fpr_at_tpr(confidence, labels, 0.95))}


def scaling_invariance(scores: np.ndarray, labels: np.ndarray, transform: Callable = squared_scores,
                       thresholds: np.ndarray = CONFIDENCE_GRID) -> Dict[str, Any]:
    """Compare OSCR, CCR@FPR and precision-vs-confidence of ``scores`` and ``transform(scores)``."""
    other = transform(scores)
    a, b = oscr(scores, labels), oscr(other, labels)
    ccr_a, ccr_b = ccr_at_fpr(scores, labels, FPR_TARGETS), ccr_at_fpr(other, labels, FPR_TARGETS)
    prec_a = precision_vs_confidence(scores, labels, thresholds).value
    prec_b = precision_vs_confidence(other, labels, thresholds).value
    diff = np.abs(prec_a - prec_b)
    has = np.isfinite(diff)
    where = int(np.flatnonzero(has)[np.argmax(diff[has])]) if has.any() else None
    return {"oscr_identical": bool(np.array_equal(a.fpr, b.fpr) and np.array_equal(a.ccr, b.ccr)),
            "oscr_points": int(len(a.fpr)),
            "ccr_at_fpr_identical": bool(np.array_equal(ccr_a, ccr_b, equal_nan=True)),
            "precision_max_abs_difference": float(diff[where]) if where is not None else None,
            "at_threshold": float(thresholds[where]) if where is not None else None}


def _confidence_values(scores, labels) -> Dict[str, np.ndarray]:
    return {"precision": precision_vs_confidence(scores, labels, CONFIDENCE_GRID).value,
            "accuracy": accuracy_vs_confidence(scores, labels, CONFIDENCE_GRID).value}


class _Collector:
    """Per-seed rows, OSCR curves and confidence curves of every evaluated row."""

    def __init__(self):
        self.per_seed: List[Dict[str, Any]] = []
        self.oscr: Dict[str, List[Tuple[np.ndarray, np.ndarray]]] = {}
        self.n_unknown: Dict[str, int] = {}
        self.confidence: Dict[str, Dict[str, List[np.ndarray]]] = {}
        self.labels: Dict[str, str] = {}

    def add(self, approach: str, model: str, display: str, scores, labels, seed: int) -> None:
        self.per_seed.append(result_row(approach, model, scores, labels, seed))
        curve = oscr(scores, labels)
        self.oscr.setdefault(approach, []).append((curve.fpr, curve.ccr))
        self.n_unknown[approach] = int((labels < 0).sum())
        for kind, values in _confidence_values(scores, labels).items():
            self.confidence.setdefault(approach, {}).setdefault(kind, []).append(values)
        self.labels[approach] = display

    def mean_confidence(self) -> Dict[str, Dict[str, np.ndarray]]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: nothing accepted
            return {row: {kind: np.nanmean(np.stack(v), axis=0) for kind, v in kinds.items()}
                    for row, kinds in self.confidence.items()}


def lenet_results(run_dir: Path, collector: _Collector) -> List[str]:
    """Add the LeNet++ rows of a reproduction's stored outputs; returns notes for the report."""
    run_dir = Path(run_dir)
    found = []
    for seed, approach, outputs in iter_run_outputs(run_dir):
        if approach not in LENET_APPROACHES or "known" not in outputs or UNKNOWN not in outputs:
            continue
        scores = np.concatenate([softmax_scores(outputs["known"]["logits"]), softmax_scores(outputs[UNKNOWN]["logits"])])
        labels = np.concatenate([outputs["known"]["labels"], np.full(len(outputs[UNKNOWN]["labels"]), -1)])
        from agnostophobia.plotting.style import approach_name

        collector.add(approach, "lenet++", approach_name(approach), scores, labels, seed)
        found.append(f"seed{seed}/{approach}")
    budget = None
    if (run_dir / "config.yaml").exists():
        try:
            budget = (yaml.safe_load((run_dir / "config.yaml").read_text()) or {}).get("budget")
        except yaml.YAMLError:
            budget = None
    if not found:
        return [f"LeNet++ run {run_dir}: no seed*/{{{','.join(LENET_APPROACHES)}}}/outputs.npz with a "
                f"'{UNKNOWN}' split yet; no LeNet++ rows"]
    return [f"LeNet++ rows from {run_dir} (budget {budget or 'unknown'}): {', '.join(found)}; "
            "max-softmax scores on its own 'known' (MNIST test) and 'notmnist' outputs"]


# --------------------------------------------------------------------------- figures

def plot_figures(out: Path, collector: _Collector, budget: str) -> Dict[str, List[str]]:
    """Fig. 3b (precision and accuracy vs confidence) and Fig. 3c (OSCR); paths relative to ``out``."""
    from agnostophobia.plotting import new_figure, oscr_series, plot_confidence_curves, plot_oscr, save_figure

    note = " — smoke budget, not a result" if budget == "smoke" else ""
    # Squared first: in Fig. 3c it lies under the ensemble's identical curve, drawn wide.
    rows = [r for r in [name for name, _ in ENSEMBLE_ROWS[::-1]] + list(LENET_APPROACHES) if r in collector.oscr]
    curves = collector.mean_confidence()

    fig, axes = new_figure(ncols=2, panel_size=(4.8, 3.9))
    for ax, kind in zip(axes[0], ("precision", "accuracy")):
        plot_confidence_curves([(collector.labels[r], CONFIDENCE_GRID, curves[r][kind]) for r in rows], ax=ax,
                               names=rows, ylabel=f"{kind} (MNIST + notMNIST)",
                               title=f"{kind.capitalize()} vs confidence")
        ax.set_xlim(0, 1)
    fig.suptitle(f"Fig. 3b: knowns MNIST test, unknowns notMNIST{note}", fontsize=10)
    paths = {"Fig. 3b: precision and accuracy vs confidence threshold":
             [str(p.relative_to(out)) for p in save_figure(fig, out / "figures" / "fig3b_confidence")]}

    fig, axes = new_figure(panel_size=(7.4, 4.2))
    ax = axes[0, 0]
    series = [oscr_series(r, collector.oscr[r], collector.n_unknown[r],
                          label=collector.labels[r] + (" (identical)" if r == "ensemble-squared" else ""))
              for r in rows]
    plot_oscr(series, ax=ax, title=f"Fig. 3c: OSCR, unknowns notMNIST{note}")
    if "ensemble-squared" in rows:  # identical to the ensemble's curve: draw it wide and pale beneath
        squared = ax.lines[rows.index("ensemble-squared")]
        squared.set_linewidth(4.5)
        squared.set_alpha(0.45)
        old = ax.get_legend()
        title = old.get_title().get_text() if old is not None else None
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, frameon=False,
                  title=title or None, title_fontsize=8, alignment="left")
    paths["Fig. 3c: OSCR curves"] = [str(p.relative_to(out)) for p in
                                     save_figure(ax.figure, out / "figures" / "fig3c_oscr")]
    return paths


# ---------------------------------------------------------------------------- report

DEVIATIONS = [
    "**Hyper-parameters we chose.** Lakshminarayanan et al. fix the architecture (3 hidden layers of 200 ReLU "
    "units), M = 5, the NLL, FGSM adversarial training at epsilon = 1 % of the input range and Adam; the "
    "batch size (100), learning rate (1e-3, Adam's default betas) and number of epochs (`paper`: 40) are "
    "our choices.",
    "**No batch normalisation** by default (the architecture specified for this baseline); "
    "`batch_norm: true` adds BatchNorm1d after every hidden linear layer, should a comparison with a "
    "batch-normalised MLP be wanted.",
    "**All training images, last epoch.** No validation split and no early stopping: every member trains on "
    "the whole MNIST training set (or the budget's stratified subset) and keeps its last epoch's weights.",
    "**Adversarial examples are clipped to [0, 1]**, the valid pixel range, and made from the gradient of the "
    "batch-mean NLL with the weights of the current step (its sign per pixel is that of each sample's own "
    "NLL). Clean and adversarial NLL have equal weight.",
    "**Preprocessing of the LeNet++ experiment**: white-on-black 28x28 (`data.preprocess.prepare_images`), x / 255, "
    "flattened; no mean/std normalisation, so epsilon = 0.01 is 1 % of the input range.",
    "**Unknowns are notMNIST_small (18,724)**, the set of the paper's Table 2; knowns are the 10,000 MNIST "
    "test images. The confidence is the ensemble's maximum averaged probability.",
    "**Squared MLP** = the averaged probabilities squared element-wise, not renormalised (the paper's "
    "\"softmax scores scaled by simply squaring them\").",
    "**Dhamija et al. published no ensemble code** (REFERENCES.md), so their own training settings for "
    "Fig. 3 are unknown; this is our reading of Lakshminarayanan et al.",
]


def write_report(out: Path, metrics: Dict[str, Any], figures: Optional[Dict[str, List[str]]]) -> Path:
    budget = metrics["budget"]
    lines = ["# Reproduction: adversarially trained MLP ensemble (paper Fig. 3b/3c, budget "
             f"`{budget}`)", ""]
    if budget == "smoke":
        lines += [f"> **Smoke budget: not a result.** {metrics['data']['train']:,} training images and "
                  f"{metrics['config']['epochs']} epoch(s), to check that the pipeline runs end to end. Do not read "
                  "anything into these numbers.", ""]
    elif budget != "paper":
        lines += [f"> **Shortened run (`{budget}` budget).** Fewer epochs than the `paper` budget (see Setup); "
                  "the numbers are from this run.", ""]
    cfg = metrics["config"]
    lines += ["## Setup", "",
              f"- **command**: `{metrics['command']}`",
              f"- **device**: {metrics['device']}",
              f"- **wall time of this call**: {metrics['wall_time_s']:.1f} s; training time summed over members "
              f"(including earlier calls): {metrics['train_time_s']:.1f} s; mean training throughput "
              f"{format_value(metrics['train_images_per_s'], digits=0)} images/s (with FGSM)",
              f"- **budget**: `{budget}`; **ensembles (seeds)**: {cfg['seeds']}; **members**: {cfg['members']}",
              f"- **data**: {metrics['data']['train']:,} MNIST training images; knowns: "
              f"{metrics['data']['known']:,} MNIST test; unknowns: {metrics['data'][UNKNOWN]:,} notMNIST",
              "", "### Hyper-parameters", ""]
    lines += [f"- `{k}`: {v}" for k, v in cfg.items()]
    lines += ["- fixed: Adam betas (0.9, 0.999) and eps 1e-8 (PyTorch defaults), PyTorch's default initialisation, "
              "member m of ensemble k seeded with `seed + 1000 k + m` (initialisation and data order)"]
    lines += ["", "### Members", "", "| seed | member | member seed | closed-set acc. (MNIST test) | "
              "last epoch: train loss | train acc. | train time (s) |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for m in metrics["members"]:
        lines.append(f"| {m['seed']} | {m['member']} | {m['member_seed']} | {m['closed_set_accuracy']:.4f} | "
                     f"{format_value(m['train_loss'])} | {format_value(m['train_accuracy'])} | {m['train_time_s']:.1f} |")
    lines += ["", "## CCR at FPR (notMNIST as unknowns)", "",
              f"Readout: {metrics['fpr_readout']}. Mean ± std over seeds where there are several. LeNet++ values "
              "of the paper's Table 2 in italics (the paper gives no table for the ensemble).", "",
              "| Model | Row | " + " | ".join(f"CCR@{k}" for k in FPR_KEYS) +
              " | closed-set acc. | AUROC | #known | #unknown |",
              "|---|---|" + "---:|" * (len(FPR_KEYS) + 4)]
    from agnostophobia.experiments.paper_numbers import TABLE2

    paper = TABLE2.get("lenet++", {}).get(UNKNOWN, {})
    for r in metrics["results"]:
        std = r.get("ccr_at_fpr_std") or {}
        lines.append(f"| {r['model']} | {r['display']} | " +
                     " | ".join(format_value(r["ccr_at_fpr"][k], std.get(k)) for k in FPR_KEYS) +
                     f" | {format_value(r['closed_set_accuracy'], r.get('closed_set_accuracy_std'))} | "
                     f"{format_value(r['auroc'])} | {r['num_known']:,} | {r['num_unknown']:,} |")
        if r["model"] == "lenet++" and r["approach"] in paper:
            lines.append(f"| *paper* | *{r['display']}* | " + " | ".join(f"*{format_value(v)}*" for v in paper[r["approach"]])
                         + " | | | | |")
    inv = metrics["invariance"]
    lines += ["", "## Scaling invariance (the paper's \"prone to scaling errors\")", ""]
    for item in inv:
        lines.append(f"- seed {item['seed']}: OSCR curves of the ensemble and the squared ensemble identical: "
                     f"**{'yes' if item['oscr_identical'] else 'NO'}** ({item['oscr_points']:,} points); CCR@FPR "
                     f"identical: **{'yes' if item['ccr_at_fpr_identical'] else 'NO'}**; precision-vs-confidence "
                     f"differs by up to {format_value(item['precision_max_abs_difference'])} "
                     f"(at threshold {format_value(item['at_threshold'], digits=3)}).")
    if metrics["lenet_notes"]:
        lines += ["", "## LeNet++ comparison", ""] + [f"- {n}" for n in metrics["lenet_notes"]]
    if figures:
        lines += ["", "## Figures", ""]
        for title, paths in figures.items():
            lines += [f"### {title}", ""] + [f"![{Path(p).stem}]({p})" for p in paths] + [""]
    lines += ["", "## Deviations from Lakshminarayanan et al. (2017), and why", ""] + [f"- {d}" for d in DEVIATIONS]
    if metrics["data_notes"]:
        lines += ["", "## Data notes", ""] + [f"- {n}" for n in metrics["data_notes"]]
    lines += ["", "## Files", "",
              "- `seed<k>/ensemble_probabilities.npz`: the ensemble's averaged probabilities per sample "
              "(`known__probs`, `known__labels`, `notmnist__probs`, `notmnist__labels` = -1); squaring them gives "
              "the squared rows. `seed<k>/member<m>/probabilities.npz`: each member's softmax, same layout.",
              "- `metrics.json`: every number above, per seed (`per_seed`), and the confidence curves on the "
              "threshold grid (`confidence_curves`).", ""]
    path = Path(out) / "report.md"
    atomic_write(path, lambda tmp: Path(tmp).write_text("\n".join(lines)))
    return path


# ------------------------------------------------------------------------ reproduce

def _nan_to_none(values: np.ndarray) -> List[Optional[float]]:
    return [float(v) if np.isfinite(v) else None for v in values]


def _check_stored_config(out: Path, cfg: EnsembleConfig) -> None:
    path = out / "config.yaml"
    if not path.exists():
        return
    stored = (yaml.safe_load(path.read_text()) or {}).get("training_settings")
    if stored is not None and stored != cfg.training_settings():
        raise ConfigError(f"{out} holds an ensemble run with other settings "
                          f"({_diff(stored, cfg.training_settings())}); "
                          "choose another --out, or delete it to start over")


def _member(cfg: EnsembleConfig, k: int, m: int, data: EnsembleData, out: Path, dev, progress: bool, log,
            timings: Dict[str, float], timings_path: Path):
    """Train member ``m`` of ensemble ``k`` unless it finished earlier; its stored probabilities and summary."""
    seed = member_seed(cfg, k, m)
    run_dir = out / f"seed{k}" / f"member{m}"
    key = f"seed{k}/member{m}"
    done = run_dir / "probabilities.npz"
    if done.exists():
        log(f"[seed {k}] member {m}: finished earlier, kept")
        state = load_checkpoint(run_dir / "last.pt")
        if state.get("settings") != _settings(cfg, seed):
            raise ConfigError(f"{run_dir} was trained with other settings "
                              f"({_diff(state.get('settings'), _settings(cfg, seed))}); choose another --out")
        history = state["history"]
    else:
        log(f"[seed {k}] member {m} (seed {seed}): training on {len(data.train_labels):,} images for "
            f"{cfg.epochs} epoch(s)")
        start = time.perf_counter()
        model, history = train_member(cfg, seed, data.train_images, data.train_labels, run_dir, dev, progress, log)
        save_probabilities(done, {s: (member_probabilities(model, x, cfg.eval_batch_size, dev), y)
                                  for s, (x, y) in data.test.items()})
        timings[key] = timings.get(key, 0.0) + time.perf_counter() - start
        atomic_write(timings_path, lambda tmp: Path(tmp).write_text(json.dumps(timings, indent=1)))
    stored = load_probabilities(done)
    for split, (_, labels) in data.test.items():
        if split not in stored or not np.array_equal(stored[split][1], labels):
            raise ConfigError(f"{done} holds other test samples than this configuration selects; "
                              "choose another --out")
    known_probs, known_labels = stored["known"]
    last = history[-1] if history else {}
    info = {"seed": k, "member": m, "member_seed": seed,
            "closed_set_accuracy": float((known_probs.argmax(1) == known_labels).mean()),
            "train_loss": last.get("loss"), "train_accuracy": last.get("train_accuracy"),
            "train_time_s": float(timings.get(key, sum(h["seconds"] for h in history))),
            "train_images_per_s": float(np.mean([h["images_per_s"] for h in history])) if history else None,
            "history": history}
    return stored, info


def reproduce_ensemble(budget: Optional[str] = None, seeds: Optional[int] = None, out=None, data_dir=None,
                       device: Optional[str] = None, progress: bool = True, plots: bool = True, lenet_run=None,
                       config=None, log: Callable[[str], None] = print) -> Path:
    """Train (or resume) the ensemble(s), evaluate against notMNIST, write metrics, figures and report.

    Args:
        budget: smoke, cpu or paper (default: paper with CUDA, else cpu).
        seeds: number of independent ensembles (default: the budget's).
        out: run directory (default ``runs/ensemble-BUDGET``); an existing one is resumed.
        lenet_run: a LeNet++ reproduction whose softmax / entropic / objectosphere outputs are
            compared (default ``runs/lenet++-BUDGET`` when it exists).
        config: another ensemble YAML instead of the shipped ``configs/ensemble.yaml``.

    Returns the run directory.
    """
    began = time.perf_counter()
    budget = budget or ("paper" if torch.cuda.is_available() else "cpu")
    if budget not in BUDGETS:
        raise ConfigError(f"budget {budget!r}: must be one of {list(BUDGETS)}")
    cfg = load_config(budget, config)
    overrides: Dict[str, Any] = {}
    if seeds is not None:
        if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
            raise ValueError(f"--seeds must be an integer >= 1, got {seeds!r}")
        overrides["seeds"] = seeds
    if device:
        overrides["device"] = device
    cfg = dataclasses.replace(cfg, **overrides).validate()
    dev = resolve_device(cfg.device)
    out = Path(out) if out is not None else Path("runs") / f"{cfg.name}-{budget}"
    if lenet_run is not None:
        lenet_run = Path(lenet_run)
        if not lenet_run.is_dir():
            raise ValueError(f"--lenet-run {lenet_run}: no such directory")
    elif (Path("runs") / f"lenet++-{budget}").is_dir():
        lenet_run = Path("runs") / f"lenet++-{budget}"

    out.mkdir(parents=True, exist_ok=True)
    _check_stored_config(out, cfg)
    resolved = {"budget": budget, **cfg.to_dict(), "training_settings": cfg.training_settings()}
    atomic_write(out / "config.yaml", lambda tmp: Path(tmp).write_text(yaml.safe_dump(resolved, sort_keys=False)))
    log(f"agnostophobia reproduce ensemble: budget {budget}, {cfg.seeds} ensemble(s) of {cfg.members} MLPs, "
        f"{cfg.epochs} epoch(s), on {dev}; output in {out}")

    timings_path = out / "timings.json"
    timings = json.loads(timings_path.read_text()) if timings_path.exists() else {}
    collector = _Collector()
    members_info, invariance, notes, data_sizes = [], [], [], {}
    with cpu_threads(dev, cfg.cpu_threads):
        threads = torch.get_num_threads()
        for k in range(cfg.seeds):
            data = load_data(cfg, data_dir, seed=cfg.seed + k)
            notes += [n for n in data.notes if n not in notes]
            data_sizes = {"train": len(data.train_labels), **{s: len(v[1]) for s, v in data.test.items()}}
            member_probs = []
            for m in range(cfg.members):
                probs, info = _member(cfg, k, m, data, out, dev, progress, log, timings, timings_path)
                member_probs.append(probs)
                members_info.append(info)
            ensemble = {s: (average_probabilities([p[s][0] for p in member_probs]), y)
                        for s, (_, y) in data.test.items()}
            save_probabilities(out / f"seed{k}" / "ensemble_probabilities.npz", ensemble)
            scores = np.concatenate([ensemble["known"][0], ensemble[UNKNOWN][0]])
            labels = np.concatenate([ensemble["known"][1], ensemble[UNKNOWN][1]])
            collector.add("ensemble", "mlp-ensemble", dict(ENSEMBLE_ROWS)["ensemble"], scores, labels, k)
            collector.add("ensemble-squared", "mlp-ensemble", dict(ENSEMBLE_ROWS)["ensemble-squared"],
                          squared_scores(scores), labels, k)
            invariance.append({"seed": k, **scaling_invariance(scores, labels)})

    lenet_notes = lenet_results(lenet_run, collector) if lenet_run is not None else [
        f"no LeNet++ run (none given with --lenet-run, and runs/lenet++-{budget} does not exist)"]
    order = [r for r, _ in ENSEMBLE_ROWS] + list(LENET_APPROACHES)
    results = sorted(aggregate_seeds(collector.per_seed, ("model", "approach")),
                     key=lambda r: order.index(r["approach"]))
    for r in results:
        r["display"] = collector.labels[r["approach"]]
    curves = collector.mean_confidence()
    throughput = [m["train_images_per_s"] for m in members_info if m["train_images_per_s"]]
    metrics = {
        "experiment": "ensemble", "budget": budget,
        "command": " ".join(["agnostophobia"] + sys.argv[1:]) if sys.argv and "agnostophobia" in sys.argv[0]
        else f"agnostophobia reproduce ensemble --budget {budget}",
        "device": f"{dev} ({platform.processor() or platform.machine()}"
                  + (f", {threads} thread(s))" if dev.type == "cpu" else ")"),
        "wall_time_s": round(time.perf_counter() - began, 1),
        "train_time_s": round(sum(m["train_time_s"] for m in members_info), 1),
        "train_images_per_s": float(np.mean(throughput)) if throughput else None,
        "config": cfg.to_dict(),
        "data": data_sizes,
        "fpr_readout": "CCR at FPR t = the largest CCR(theta) over thresholds with FPR(theta) <= t "
                       "(Eq. 3 of the paper); null where t < 1/#unknowns",
        "results": results,
        "invariance": invariance,
        "members": members_info,
        "lenet_run": str(lenet_run) if lenet_run is not None else None,
        "lenet_notes": lenet_notes,
        "data_notes": notes,
        "deviations": DEVIATIONS,
        "confidence_curves": {"thresholds": CONFIDENCE_GRID.tolist(),
                              "rows": {r: {kind: _nan_to_none(v) for kind, v in kinds.items()}
                                       for r, kinds in curves.items()}},
        "per_seed": collector.per_seed,
    }
    figures = plot_figures(out, collector, budget) if plots else None
    metrics["wall_time_s"] = round(time.perf_counter() - began, 1)
    atomic_write(out / "metrics.json",
                 lambda tmp: Path(tmp).write_text(json.dumps(metrics, indent=1, default=json_default)))
    report = write_report(out, metrics, figures)
    log(f"report: {report}\nmetrics: {out / 'metrics.json'}")
    return out
