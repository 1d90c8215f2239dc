"""Training: an experiment's configuration, the training loop behind ``agnostophobia train``, and
a trained run's network loaded back for inference.

The public part, for a Python script that trains and uses models as the commands do:

* configuration: :func:`load_experiment` reads an experiment YAML (a file or a shipped config's
  name) into an :class:`ExperimentConfig`; its :meth:`~ExperimentConfig.for_approach` gives the
  :class:`TrainConfig` of one run, and :func:`protocol_for` that run's data;
* training: :func:`fit` trains one run into a run directory (checkpoints, ``metrics.csv``), resuming
  where it stopped; :func:`seed_everything` and :func:`resolve_device` are the seeding and device
  rule it applies;
* inference: :func:`load_trained_model` loads a run's best network as it was trained
  (:class:`TrainedModel`), and :func:`predict` gives logits and deep features of images.

A training loop of your own needs none of this: it calls a loss of :mod:`agnostophobia.losses`
on the network's ``(logits, features)`` (the gallery's "The Entropic Open-Set loss in your own
training loop"). Everything else in this package (the epoch and step functions, seed batching, CUDA graphs,
distributed training, checkpoints, records, resume) serves the commands and may change without
notice; it has no API page.

Attributes are imported on first use: the command line imports parts of this package
(``training.auto_options``) while it parses, and ``agnostophobia --help`` must not load torch.
"""
from __future__ import annotations

from agnostophobia._lazy import lazy_attributes

_EXPORTS = {
    "TrainConfig": "config", "ExperimentConfig": "config", "load_experiment": "config", "protocol_for": "config",
    "fit": "fitting", "seed_everything": "checkpoint", "resolve_device": "device",
    "load_trained_model": "trained", "TrainedModel": "trained", "predict": "outputs",
}

__all__ = list(_EXPORTS)


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
