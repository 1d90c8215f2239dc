"""Experiment configuration: a YAML file checked strictly against :class:`TrainConfig`.

An unknown key or a value of the wrong type or range raises :class:`ConfigError`
naming the key, so a typo never silently falls back to a default.

An experiment YAML holds the :class:`TrainConfig` fields plus three experiment keys:
``approaches`` (list), ``seeds`` (int, how many) and ``budgets``
(``{budget name: {field: value}}`` overrides, e.g. ``smoke``, ``cpu``, ``paper``).

The loss hyper-parameters' one home under ``loss:`` (and the older spellings read into it) is
``training.loss_keys``; ``model_kwargs`` are checked by building the network once
(``training.model_kwargs``).
"""
from __future__ import annotations

import copy
import dataclasses
import warnings
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from yaml import YAMLError

from agnostophobia.data.image_files import LOADINGS
from agnostophobia.data.preprocess import OURS
from agnostophobia.data.streaming import CROP_PADDING, PADDING_MODES
from agnostophobia._yaml import load_yaml, read_yaml_file
from agnostophobia._validation import DEVICE_RULE, SEED_RULE, is_device_name, is_seed
from agnostophobia.data.protocols import build_protocol, check_limits, protocol_spec
from agnostophobia.errors import AgnostophobiaWarning, ConfigError
from agnostophobia.settings import field_settings, setting
from agnostophobia.training.fine_tune import recipe_schedule
from agnostophobia.losses import (LOSSES, PAPER_APPROACHES, build_loss, every_loss_setting, loss_settings,
                                  setting_problem)
from agnostophobia.models import MODELS
from agnostophobia.training.precision import PRECISIONS
from agnostophobia.training.schedules import SCHEDULERS, STEPWISE_SCHEDULERS
from agnostophobia.training.concurrent import check_concurrent_runs
from agnostophobia.training.experiment_keys import (MAX_SEEDS, check_ablation, check_approaches,  # noqa: F401
                                                      check_first_seed, check_seeds, is_int)
from agnostophobia.training.loss_keys import legacy_loss_note, with_loss_keys_moved
from agnostophobia.training.model_kwargs import check_model_kwargs
from agnostophobia.training.seed_batch import check_batched_seeds

@dataclass
class TrainConfig:
    """Everything one training run depends on. Defaults are the authors' LeNet++ protocol
    (docs/references.md): Adam, lr 0.01, batch 128, 70 epochs, best validation loss kept;
    Objectosphere's xi = 50 and lambda = 1e-4 are its loss's declared defaults (``loss:``).

    Examples:
        >>> from agnostophobia.training import TrainConfig
        >>> config = TrainConfig(approach="objectosphere", loss={"xi": 20.0}, epochs=5).validate()
        >>> config.protocol, config.model, config.epochs, config.loss_settings()
        ('lenet++', 'lenet++', 5, {'xi': 20.0})
        >>> from agnostophobia.errors import ConfigError
        >>> try:
        ...     TrainConfig(approach="entropic", epochs=0).validate()
        ... except ConfigError as error:  # one line naming the key
        ...     print(error)
        ...
        config key 'epochs': must be an integer in [1, 100000], got 0
    """

    name: str = "experiment"  # the experiment's name, in reports and run records
    protocol: Union[str, Dict[str, Any]] = "lenet++"  # a registered name, or a protocol from files (a mapping)
    protocol_limits: Dict[str, Optional[int]] = field(default_factory=dict)  # caps, e.g. {max_known_train: 600} (data.protocols.LIMITS)
    # which split of a protocol with splits (osr-mnist, osr-cifar10: 0-4; data.osr_protocols) the run
    # trains on; null for any other protocol. `train`/`reproduce`/`benchmark --split K` set it.
    protocol_split: Optional[int] = setting(int, None, low=0, nullable=True)
    # ours | authors: our corrected data preparation, or the authors' data_prep.py (lenet++ only; data.preprocess)
    preprocessing: str = OURS
    model: str = "lenet++"  # a registered model: lenet++, mlp, resnet18, torchvision/<name>
    model_kwargs: Dict[str, Any] = field(default_factory=dict)  # the model's constructor keywords
    approach: str = "entropic"  # the registered loss one run trains with (an experiment: approaches)
    # Each scalar key below is declared by its Setting (type, default, range or choices, whether a
    # resumed run may change it): validate() and the resume rule (records.RESUME_FREE_KEYS) read them.
    epochs: int = setting(int, 70, low=1, high=100_000)  # passes over the training set (bounded: 10**30 ran for ever)
    batch_size: int = setting(int, 128, low=1)   # the global batch: split over the processes under DDP (torchrun)
    optimizer: str = setting(str, "adam", choices=("adam", "sgd"))  # the optimizer; the authors': Adam
    lr: float = setting(float, 0.01, low=0, low_open=True)  # learning rate
    momentum: float = setting(float, 0.9, low=0)  # SGD's momentum (optimizer: sgd)
    weight_decay: float = setting(float, 0.0, low=0)  # L2 penalty of the optimizer
    # learning-rate schedule; cosine and step change it after each epoch, onecycle and cosine-per-step
    # after each step (onecycle: a linear warm-up over warmup_fraction of all steps from lr / 5, then
    # linear to 0, airbench's short schedule, arXiv:2404.00498; cosine-per-step: half a cosine from lr
    # down to 1e-6 over all steps, the schedule of Outlier Exposure's code and the fine-tunes that extend it)
    scheduler: str = setting(str, "none", choices=SCHEDULERS)
    warmup_fraction: float = setting(float, 0.25, low=0, high=1)  # the share of all steps warming up (scheduler: onecycle)
    # epochs of an approach that fine-tunes (its loss's FineTune recipe, e.g. outlier-exposure-ft);
    # null: the recipe's, its paper's (10). A budget shortens them where its networks converge sooner.
    fine_tune_epochs: Optional[int] = setting(int, None, low=1, high=100_000, nullable=True)
    step_size: int = setting(int, 30, low=1)     # epochs between two decays (scheduler: step)
    gamma: float = setting(float, 0.1, low=0)    # each decay's factor on the lr (scheduler: step)
    # > 0: every batch holds batch_size - negatives_per_batch knowns and this many negatives, and an
    # epoch is one pass over the knowns (the negatives cycle, reshuffled at each pass), as Outlier
    # Exposure's code draws a batch of each (training.batches; an approach that trains on knowns
    # only ignores it); 0: knowns and negatives share the batches of one shuffled order, an epoch one
    # pass over both
    negatives_per_batch: int = setting(int, 0, low=0)
    # the fine-tunes (outlier-exposure-ft, energy-regularized-ft, mixoe-ft) exactly as their authors'
    # code trains them: a batch of knowns and one of negatives at their sizes, the cosine stepped per
    # step (true); false: the run's shared batches and a cosine stepped per epoch, half the samples
    # an epoch (the benchmark's default: the fine-tunes are marked "not the authors' recipe"). Free
    # to differ between a run and its checkpoints: a from-scratch approach never reads it, and a
    # fine-tune's checkpoint holds the keys it set (batch_size, negatives_per_batch, scheduler)
    fine_tune_exact: bool = setting(bool, False, resumable=True)
    # The hyper-parameters of the registered losses, by their constructor's keyword names
    # (losses.loss_settings; e.g. Objectosphere's xi and lambda, Eq. 2): {xi: 50, lambda: 1.0e-4}
    loss: Dict[str, Any] = field(default_factory=dict)
    # inverse class frequency, unknowns as one class: on, as the authors' Keras training; a loss module
    # called outside the trainer is unweighted unless given sample_weight (losses.weights)
    sample_weighting: bool = setting(bool, True)
    augment: str = setting(str, "none", choices=("none", "crop-flip"))  # training images' augmentation; crop-flip (CIFAR): random crop with padding, h-flip
    # crop-flip's zero padding in pixels: 4 is the usual CIFAR augmentation, 2 airbench's lighter
    # translation for short schedules (arXiv:2404.00498)
    crop_padding: int = setting(int, CROP_PADDING, low=0, high=16)
    # what fills crop-flip's padding: zeros (constant), the usual CIFAR augmentation, or the image
    # mirrored at its border (reflect), airbench's: no black frame that test images never have
    crop_padding_mode: str = setting(str, PADDING_MODES[0], choices=PADDING_MODES)
    # the checkpoint a run keeps as its result (best.pt, which evaluation reads): the epoch of the lowest
    # validation loss, as the authors kept for LeNet++, or the last epoch, for a schedule that decays to
    # zero (onecycle) and whose last weights are its result -- there the lowest validation loss falls
    # epochs before the end, mid-decay, at a lower accuracy than the last epoch's (docs/guide/scaling.md)
    keep_checkpoint: str = setting(str, "lowest-val-loss", choices=("lowest-val-loss", "last"))
    seed: int = 0                    # training seed: initialisation, data order, augmentation
    data_seed: int = 0               # data seed: validation split and training subsample, fixed across seeds
    device: str = setting(str, "auto", resumable=True)  # where the network runs: auto | cpu | cuda | cuda:N (checked in validate)
    # fp32 | bf16 (autocast) | auto: bf16 where the device computes it natively
    precision: str = setting(str, "auto", choices=PRECISIONS)
    # deterministic algorithms: bit-identical reruns and resumes on CUDA too (not resumable: on CUDA it
    # changes which algorithms compute the result)
    deterministic: bool = setting(bool, False)
    # > 0: FGSM adversarial training, step in input units, which lie in [0, 1] (training.adversarial)
    adversarial_epsilon: float = setting(float, 0.0, low=0, high=1)
    # torch intra-op threads on the CPU; null: PyTorch's default
    cpu_threads: Optional[int] = setting(int, None, low=1, nullable=True, resumable=True)
    channels_last: bool = setting(bool, True)  # NHWC memory layout for convolutions
    # the training step captured in a CUDA graph and replayed (training.cuda_graph); CUDA only, off
    # until a whole reproduction has run with it on a GPU
    cuda_graph: bool = setting(bool, False, resumable=True)
    # the network's forward and backward compiled by torch.compile (inductor; training.compiled):
    # true, false, or auto (on a CPU where inductor finds a C++ compiler; off on a GPU, where no
    # run has measured it yet). Where compiling fails the run trains eagerly and says so once.
    compile: Union[str, bool] = setting(bool, False, words=("auto",), resumable=True)
    eval_batch_size: int = setting(int, 1024, low=1, resumable=True)  # batch size when outputs are stored
    # TensorBoard scalars in RUN/seed*/<approach>/tb: auto (on when the tensorboard package, the
    # [tensorboard] extra, is installed), true (an error without it) or false (training.epoch_log)
    tensorboard: Union[str, bool] = setting(bool, "auto", words=("auto",), resumable=True)
    progress: bool = setting(bool, True, resumable=True)  # progress bars on the terminal
    data_dir: Optional[str] = setting(str, None, nullable=True, resumable=True)  # where datasets are read; null: $AGNOSTOPHOBIA_DATA or the cache
    # A protocol from files: images held in memory, or decoded on the fly by worker processes
    # (auto: streamed from 2 GiB of decoded training images on; data.image_files.choose_loading)
    data_loading: str = setting(str, "auto", choices=LOADINGS)
    # streaming's decoding processes; null: min(4, CPU count); 0: decode in the training process
    num_workers: Optional[int] = setting(int, None, low=0, nullable=True, resumable=True)
    # Settings of any registered detector, by name: {knn: {k: 20}, evm: {tail_size: 20}}; each is
    # checked against the settings the detector declares (detectors.stored.detector_settings)
    detectors: Dict[str, Any] = setting(dict, factory=dict, resumable=True)  # evaluation, not training
    # OpenMax's settings (on the logits: Bendale & Boult 2016; Fig. 1d of the paper), the older
    # spelling of detectors.openmax, still read (detectors.openmax wins where both set a key). Empty
    # by default: each setting left out takes the default its detector declares
    # (detectors/openmax.py), the one place it is written.
    openmax: Dict[str, Any] = setting(dict, factory=dict, resumable=True)
    # k-NN's settings (on the deep features: Sun et al. 2022), the older spelling of detectors.knn,
    # still read (detectors.knn wins); its defaults are declared in detectors/knn.py
    knn: Dict[str, Any] = setting(dict, factory=dict, resumable=True)

    def validate(self, where: str = "") -> "TrainConfig":
        """Check every value, nested mappings included; ``where`` prefixes the key paths
        named in errors (``budgets.cpu.``).

        Args:
            where: the prefix of the key paths an error names (``budgets.cpu.``); '' for none.

        Returns:
            The config itself, ``self``, checked.

        Raises:
            ~agnostophobia.errors.ConfigError: the first bad value, naming its key path.
        """
        def need(cond: bool, key: str, what: str):
            if not cond:
                raise ConfigError(f"config key {where + key!r}: {what}, got {getattr(self, key)!r}")

        need(isinstance(self.approach, str) and self.approach in LOSSES, "approach",
             f"must be one of {tuple(LOSSES.registered())}")  # an approach is its loss
        # names are checked here, before a run directory is written, not when training starts
        # (a protocol from files: its keys and values; the files are checked when it is built)
        spec = protocol_spec(self.protocol, f"{where}protocol")
        spec.check_preprocessing(self.preprocessing)
        if self.protocol_split is not None and is_int(self.protocol_split):  # a wrong type: its Setting says so
            spec.check_split(self.protocol_split, f"config key '{where}protocol_split'")
        need(isinstance(self.model, str) and self.model in MODELS, "model",
             f"must be a registered model (torchvision/NAME for a torchvision one; {MODELS.hint(str(self.model))})")
        for key, declared in field_settings(TrainConfig).items():  # every key declared by its Setting
            problem = declared.problem(getattr(self, key))
            need(problem is None, key, problem)
        need(is_device_name(self.device), "device", f"must be {DEVICE_RULE}")
        for key in ("seed", "data_seed"):
            need(is_int(getattr(self, key)) and is_seed(getattr(self, key)), key, SEED_RULE)
        need(isinstance(self.model_kwargs, dict), "model_kwargs", "must be a mapping")
        check_model_kwargs(self.model, self.model_kwargs, f"{where}model_kwargs")
        need(isinstance(self.protocol_limits, dict), "protocol_limits", "must be a mapping")
        for key, value in self.protocol_limits.items():  # checked by the protocol builder's own rule
            try:
                check_limits({key: value}, 0)
            except ConfigError as exc:
                raise ConfigError(f"config key '{where}protocol_limits.{key}': {exc}") from None
        # detector settings: mappings (declared above); their names and values are checked against
        # the detectors' own declarations one layer up (detectors.stored.detector_settings)
        for name, values in self.detectors.items():
            if not isinstance(values, dict):
                raise ConfigError(f"config key '{where}detectors.{name}': must be a mapping of settings, "
                                  f"got {values!r}")
        need(self.negatives_per_batch < self.batch_size, "negatives_per_batch",
             f"must be below batch_size ({self.batch_size}): a batch needs a known")
        need(not (self.cuda_graph and self.scheduler in STEPWISE_SCHEDULERS), "cuda_graph",
             f"cannot be true with scheduler: {self.scheduler} (its learning rate changes at every step, and a "
             "captured step would be captured again at every replay)")
        self._check_loss_settings()
        return self

    def loss_settings(self) -> Dict[str, Any]:
        """The keyword arguments of the approach's loss: each hyper-parameter its loss reads
        (:func:`~agnostophobia.losses.loss_settings`) that ``loss:`` sets; one set nowhere
        keeps its declared default.

        Returns:
            ``{keyword: value}`` for the approach's loss constructor.
        """
        return {name: self.loss[name] for name in loss_settings(self.approach) if name in self.loss}

    def _check_loss_settings(self) -> None:
        """``loss:`` names only hyper-parameters some registered loss reads (a config may list
        several approaches), and the approach's loss accepts its settings."""
        if not isinstance(self.loss, dict):
            raise ConfigError(f"config key 'loss': must be a mapping of loss settings, got {self.loss!r}")
        declared = every_loss_setting()
        for key, value in self.loss.items():
            if key not in declared:
                raise ConfigError(f"config key 'loss.{key}': no registered loss declares it; "
                                  f"loss settings: {sorted(declared) or 'none'}")
            problem = setting_problem(key, value, [self.approach])  # by the declaration of the loss that reads it
            if problem:
                raise ConfigError(f"config key 'loss.{key}': {problem}, got {value!r}")
        try:
            build_loss(self.approach, 1, **self.loss_settings())
        except ValueError as exc:
            raise ConfigError(f"config key 'loss' (approach {self.approach}): {exc}") from None

    def to_dict(self) -> Dict[str, Any]:
        """The config as plain data, as a run's ``config.yaml`` and checkpoints keep it.

        Returns:
            ``{key: value}`` of every field, nested mappings copied.
        """
        return dataclasses.asdict(self)


def protocol_for(cfg: Union["TrainConfig", Dict[str, Any]], data_dir=None):
    """The run's protocol, drawn with the data seed (not the training seed): every training
    seed of a run sees the same validation split and training subsample.

    Args:
        cfg: a :class:`TrainConfig`, or a checkpoint's config dict.
        data_dir: the datasets' folder, instead of the config's ``data_dir`` (a run moved to
            another machine).

    Returns:
        The :class:`~agnostophobia.data.OpenSetProtocol` (training, validation and test splits).

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from agnostophobia.data import make_glyph_folders
        >>> folder = tempfile.TemporaryDirectory()
        >>> layout = make_glyph_folders(Path(folder.name) / "glyphs", per_split={"train": 6, "val": 2, "test": 2})
        >>> from agnostophobia.training import TrainConfig, protocol_for
        >>> config = TrainConfig(protocol=layout, model="mlp", data_seed=1)
        >>> first, again = protocol_for(config), protocol_for(config.to_dict())  # a config or a checkpoint's dict
        >>> bool((first.val.labels == again.val.labels).all()), first.input_shape  # the data seed fixes the splits
        (True, (1, 28, 28))
        >>> folder.cleanup()
    """
    values = cfg.to_dict() if isinstance(cfg, TrainConfig) else cfg
    return build_protocol(values["protocol"], data_dir=data_dir or values.get("data_dir"),
                          seed=values.get("data_seed", 0), data_loading=values.get("data_loading", "auto"),
                          preprocessing=values.get("preprocessing", OURS), split=values.get("protocol_split"),
                          **(values.get("protocol_limits") or {}))


@dataclass
class ExperimentConfig:
    """A :class:`TrainConfig` shared by several approaches, seeds and budgets.

    Examples:
        >>> from agnostophobia.training import load_experiment
        >>> experiment = load_experiment("lenet++")  # the packaged configs/lenet++.yaml
        >>> experiment.approaches[:3]
        ['softmax', 'background', 'entropic']
        >>> run = experiment.for_budget("cpu").with_set_options([("epochs", 2)]).for_approach("entropic", seed=1)
        >>> run.approach, run.seed, run.epochs
        ('entropic', 1, 2)
    """

    train: TrainConfig  # the settings every run of the experiment shares
    approaches: List[str]  # the registered losses trained, one run each
    seeds: int = 1  # how many seeds per approach (0, 1, ...)
    budgets: Dict[str, Dict[str, Any]] = field(default_factory=dict)  # {name: {key: value}} overrides, e.g. cpu
    # ``agnostophobia ablate``: budgets that each add one factor to the one before ({budget, adds})
    ablation: List[Dict[str, str]] = field(default_factory=list)
    # runs (approaches x seeds) trained at the same time, one process each: "auto" or N (training.concurrent)
    concurrent_runs: Union[str, int] = "auto"
    # the seeds of each approach trained as one batched model: "auto", True or False (training.seed_batch)
    batched_seeds: Union[str, bool] = "auto"
    # set by experiments.reproduce.configure: "fp32 (auto: this CPU has no native bf16)", the
    # precision chosen and why, printed when training starts and kept in run_meta.json for the report
    precision_chosen: Optional[str] = None
    first_seed: int = 0  # the first training seed: seeds first_seed .. first_seed + seeds - 1 are trained

    @property
    def seed_numbers(self) -> range:
        """The training seeds the experiment trains, in order (``seeds`` of them from ``first_seed``)."""
        return range(self.first_seed, self.first_seed + self.seeds)

    def for_budget(self, budget: Optional[str]) -> "ExperimentConfig":
        """The experiment with the budget's overrides applied (None: unchanged).

        Args:
            budget: the name of one of the config's ``budgets``, or None.

        Returns:
            A new :class:`ExperimentConfig` (``self`` for None).

        Raises:
            ~agnostophobia.errors.ConfigError: ``budget`` is not defined in the config, or one of its
                overrides is not a valid value.
        """
        if budget is None:
            return self
        if budget not in self.budgets:
            raise ConfigError(f"budget {budget!r} is not defined in this config; defined: {sorted(self.budgets)}")
        return self.with_overrides(self.budgets[budget], f"budgets.{budget}.")

    def with_overrides(self, values: Dict[str, Any], where: str = "") -> "ExperimentConfig":
        """The experiment with ``values`` (config keys: a budget's, or a ``--set``) applied and
        checked as the config file's own keys are; ``where`` prefixes the key an error names.

        Args:
            values: ``{config key: value}``.
            where: the prefix of the key paths an error names (``budgets.cpu.``).

        Returns:
            A new :class:`ExperimentConfig`; ``self`` is unchanged.
        """
        overrides = dict(values)
        approaches = overrides.pop("approaches", self.approaches)
        seeds = check_seeds(overrides.pop("seeds", self.seeds))  # first: first_seed's check reads it
        first_seed = check_first_seed(overrides.pop("first_seed", self.first_seed), seeds,
                                      f"config key '{where}first_seed'")
        concurrent_runs = check_concurrent_runs(overrides.pop("concurrent_runs", self.concurrent_runs),
                                                f"config key '{where}concurrent_runs'")
        batched_seeds = check_batched_seeds(overrides.pop("batched_seeds", self.batched_seeds),
                                            f"config key '{where}batched_seeds'")
        train = apply_overrides(self.train, with_loss_keys_moved(overrides, self.train.loss), where)
        return ExperimentConfig(train, check_approaches(approaches), seeds, self.budgets, self.ablation,
                                concurrent_runs, batched_seeds, first_seed=first_seed)

    def with_set_options(self, pairs: Sequence[Tuple[str, Any]]) -> "ExperimentConfig":
        """The experiment with each ``--set KEY=VALUE`` (``parse_set_option``) applied in turn,
        after the budget: a dotted KEY sets one key of a mapping (``loss.xi``, ``protocol.root``)
        and keeps its others. Each is checked as the config file's keys are; an error is the
        file's wording, prefixed with ``--set KEY`` where the file's would name the file.

        Args:
            pairs: the ``(KEY, VALUE)`` pairs, in the order given on the command line.

        Returns:
            A new :class:`ExperimentConfig`; ``self`` is unchanged.

        Raises:
            ~agnostophobia.errors.ConfigError: an unknown key or a bad value, prefixed with ``--set KEY``.
        """
        experiment = self
        for key, value in pairs:
            try:
                experiment = experiment.with_overrides(_set_override(experiment, key, value))
            except ConfigError as exc:
                raise ConfigError(f"--set {key}: {exc}") from None
        return experiment

    def for_approach(self, approach: str, seed: int) -> TrainConfig:
        """The run of ``approach`` with ``seed``; an approach that fine-tunes (its loss's
        ``fine_tune`` recipe) trains for the recipe's epochs (``fine_tune_epochs`` where the config
        sets it) at the recipe's learning rate, schedule, optimizer and weight decay, its authors'
        recipe for the protocol's kind of images (``training.fine_tune.recipe``).

        Args:
            approach: the registered loss the run trains with.
            seed: the run's training seed.

        Returns:
            The run's :class:`TrainConfig`, validated.
        """
        schedule = recipe_schedule(approach, self.train.fine_tune_epochs, self.train.protocol,
                                   self.train.fine_tune_exact)
        return dataclasses.replace(self.train, approach=approach, seed=seed, **schedule).validate()


def parse_set_option(text: str) -> Tuple[str, Any]:
    """``KEY=VALUE`` of a ``--set``: the key (dotted for a nested one) and the value read as the
    config file reads a value (YAML: ``20`` an integer, ``0.5`` a number, ``true``, ``null``,
    ``[a, b]``, else a string)."""
    key, equals, value = text.partition("=")
    key = key.strip()
    if not equals or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE, e.g. epochs=5 or loss.xi=20")
    try:
        return key, load_yaml(value) if value.strip() else None
    except YAMLError as exc:
        raise ConfigError(f"--set {key}: value {value!r} is not valid YAML: "
                          f"{getattr(exc, 'problem', None) or exc}") from None


def _set_override(experiment: "ExperimentConfig", key: str, value) -> Dict[str, Any]:
    """The config keys one ``--set`` changes: ``{top: value}``, with a dotted key's value put
    into the mapping it names (its other keys kept; ``loss`` is merged by ``with_overrides``)."""
    top, *inner = key.split(".")
    if inner:
        current = {} if top == "loss" else experiment.train.to_dict().get(top)
        if not isinstance(current, dict):
            raise ConfigError(f"config key {top!r} holds {current!r}, not a mapping, so it has no key "
                              f"{'.'.join(inner)!r}")
        value = _merged(current, inner, value)
    values = {top: value}
    if top == "protocol":  # a path given on the command line is relative to the working directory
        values = _absolute_protocol_paths(values, ".")
    return values


def _merged(mapping: Dict[str, Any], keys: List[str], value) -> Dict[str, Any]:
    """A copy of ``mapping`` with ``value`` at the key path ``keys``."""
    out = dict(mapping)
    head, *rest = keys
    out[head] = _merged(out.get(head) if isinstance(out.get(head), dict) else {}, rest, value) if rest else value
    return out


def apply_overrides(base, values: Dict[str, Any], where: str = ""):
    """``base`` (a config dataclass with ``validate()``) with ``values`` applied and validated.

    An unknown key raises :class:`ConfigError` naming its full path (``where`` is the
    prefix, e.g. ``"budgets.smoke."``); an integer given for a float field becomes a float.
    """
    names = {f.name for f in fields(base)}
    changes = {}
    for name, value in values.items():
        if name not in names:
            raise ConfigError(f"unknown config key {where + str(name)!r}; known keys: {sorted(names)}")
        if isinstance(getattr(base, name), float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        changes[name] = value
    return dataclasses.replace(base, **changes).validate(where)


def parse_experiment(data: Dict[str, Any], where: str = "", base_dir=None) -> ExperimentConfig:
    """An experiment from a YAML's contents. The paths of a protocol from files are made
    absolute against ``base_dir`` (the YAML file's directory; default: the working directory)."""
    if not isinstance(data, dict):
        raise ConfigError(f"config {where}: top level must be a mapping, got {type(data).__name__}")
    data = _absolute_protocol_paths(data, base_dir)
    approaches = check_approaches(data.pop("approaches", list(PAPER_APPROACHES)))  # an approach is its loss
    seeds = check_seeds(data.pop("seeds", 1))
    first_seed = check_first_seed(data.pop("first_seed", 0), seeds)
    budgets = data.pop("budgets", {}) or {}
    if not isinstance(budgets, dict):
        raise ConfigError("config key 'budgets': must be a mapping of budget name to overrides")
    for budget, overrides in budgets.items():
        if not isinstance(overrides, dict):
            raise ConfigError(f"config key 'budgets.{budget}': must be a mapping")
    budgets = {budget: _absolute_protocol_paths(overrides, base_dir) for budget, overrides in budgets.items()}
    ablation = check_ablation(data.pop("ablation", []) or [], budgets)
    concurrent_runs = check_concurrent_runs(data.pop("concurrent_runs", "auto"))
    batched_seeds = check_batched_seeds(data.pop("batched_seeds", "auto"))
    experiment = ExperimentConfig(apply_overrides(TrainConfig(), with_loss_keys_moved(data)), approaches, seeds, budgets,
                                  ablation, concurrent_runs, batched_seeds, first_seed=first_seed)
    for budget in budgets:  # fail early on a bad override, not after hours of training
        experiment.for_budget(budget)
    return experiment


def load_experiment(path) -> ExperimentConfig:
    """Load an experiment YAML, checked key by key before anything runs.

    A file is read and parsed once per process (and again only once it changes): a command that
    checks its ``--budget`` and then runs reads it once. Each call returns its own copy.

    Args:
        path: a YAML file, or the name of a config shipped with the package (``lenet++``,
            ``cifar10``, ... as ``agnostophobia reproduce`` takes them).

    Returns:
        The :class:`~agnostophobia.training.ExperimentConfig`; ``for_budget`` and ``for_approach``
        give one run's :class:`~agnostophobia.training.TrainConfig`.

    Raises:
        ~agnostophobia.errors.ConfigError: an unreadable file, or an unknown key or bad value,
            named with its key path.

    Examples:
        >>> from agnostophobia.training import load_experiment
        >>> experiment = load_experiment("lenet++")  # the packaged configs/lenet++.yaml
        >>> experiment.train.epochs, experiment.seeds
        (70, 1)
    """
    path = resolve_config_path(path)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _PARSED:
        data = read_yaml(path)
        note = legacy_loss_note(data) if isinstance(data, dict) else None
        if note:  # once per file: a file is parsed once
            warnings.warn(f"{path}: {note}", AgnostophobiaWarning, stacklevel=2)
        _PARSED[key] = parse_experiment(data, str(path), base_dir=path.parent)
    return copy.deepcopy(_PARSED[key])


_PARSED: Dict[Tuple[str, int, int], "ExperimentConfig"] = {}  # (file, mtime, size) -> its experiment


def read_yaml(path: Path):
    """The contents of a YAML file (:mod:`agnostophobia._yaml`, the package's one loader); a FIFO,
    unparsable YAML, an alias, a repeated key or an unreadable file is a one-line
    :class:`ConfigError` naming the file (and line)."""
    return read_yaml_file(path, ConfigError)


def _absolute_protocol_paths(data: Dict[str, Any], base_dir) -> Dict[str, Any]:
    """``data`` with the paths of a ``protocol:`` mapping made absolute, so that a run's
    config.yaml (and its checkpoints) find the files from any working directory."""
    data = dict(data)
    if "protocol" in data:
        data["protocol"] = protocol_spec(data["protocol"], "protocol").config_value(base_dir or ".")
    return data


CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


def resolve_config_path(path) -> Path:
    candidate = Path(path)
    if candidate.exists() and not candidate.is_dir():  # a FIFO or device too: read_yaml names what it is
        return candidate
    shipped = CONFIG_DIR / f"{path}.yaml"
    if shipped.is_file():
        return shipped
    names = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
    raise ConfigError(f"config {str(path)!r} is neither a file nor a shipped config; shipped: {names}")
