"""Where what an approach does comes from, beside its code: the :class:`Provenance` of a fact that is no
setting, and the :class:`FineTune` recipe of an approach that fine-tunes another's trained network
(the docs' table of where each default comes from, docs/training-peers.md, is made from them)."""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple


class Provenance(NamedTuple):
    """Where a fact of an approach that is no setting comes from (a setting's is its
    :class:`~agnostophobia.settings.Setting`'s ``source`` and ``differs``): what it is about
    (``topic``: the loss itself, its recipe, its auxiliary outliers), what is done here
    (``ours``), where the authors' or a library's choice was read (``source``) and what is
    different here (``differs``; "": nothing). The docs' table of where each default comes from
    (docs/training-peers.md) is made from these.

    Examples:
        >>> from agnostophobia.losses import LOSSES
        >>> [fact.topic for fact in LOSSES.get("outlier-exposure").provenance]
        ['auxiliary outliers']
        >>> LOSSES.get("outlier-exposure").provenance[0].ours
        "the protocol's negatives"
    """

    topic: str  # what it is about: "loss", "recipe", "auxiliary outliers"
    ours: str  # what is done here
    source: str  # where it was read: the paper, the authors' code, pytorch-ood 0.4.0, OpenOOD v1.5
    differs: str = ""  # what is different here from that source ("": nothing)


def from_scratch(source: str, differs: str = "") -> Provenance:
    """The :class:`Provenance` of a recipe that trains from scratch for the run's epochs, learning
    rate and schedule (an approach's ``scratch_recipe``), read in ``source``."""
    return Provenance("recipe", "from scratch: the budget's epochs, learning rate and schedule", source, differs)


def auxiliary_outliers(source: str) -> Provenance:
    """The :class:`Provenance` of the negatives an approach that trains on them uses here (the
    protocol's) against those its paper and code used, read in ``source``."""
    return Provenance("auxiliary outliers", "the protocol's negatives", source,
                      "EMNIST letters (``lenet++``); CIFAR-10 horse and ship (``cifar10-split``; automobile and deer in "
                      "``cifar10-split-b``) or CIFAR-100 "
                      "super-classes 0-9 (``cifar``)")


#: The schedule a fine-tune trains with unless ``fine_tune_exact``: a cosine stepped once per epoch.
SHARED_BATCHES_SCHEDULER = "cosine"


class FineTune(NamedTuple):
    """How a loss's paper trains it when it fine-tunes a trained network instead of training from
    scratch: the run of ``start`` (another approach of the same run and seed) gives the initial
    weights (its best checkpoint), then ``epochs`` at learning rate ``lr`` with ``scheduler``,
    ``optimizer`` and ``weight_decay`` (SGD with the run's momentum, Nesterov, as the authors' code),
    each step on a ``batch`` of knowns and one of negatives; everything else is the run's.
    ``source`` says where the recipe comes from and ``differs`` what is different here besides the
    batches and their schedule ("": nothing; a config's ``fine_tune_epochs`` is read from the configs,
    not stated here). With the config key ``fine_tune_exact`` false (the default) the run's shared
    batches and a cosine stepped per epoch replace the authors' (:meth:`schedule`, :meth:`departures`).
    ``glyphs`` is the authors' recipe for grey glyph images (MNIST), where it is another (None: this
    one): a protocol whose images are glyphs (``lenet++``) trains with it (:meth:`for_images`).

    Examples:
        >>> from agnostophobia.losses import LOSSES
        >>> recipe = LOSSES.get("outlier-exposure-ft").fine_tune
        >>> recipe.start, recipe.epochs, recipe.lr, recipe.optimizer, recipe.weight_decay, recipe.batch
        ('softmax', 10, 0.001, 'sgd', 0.0005, (128, 256))
        >>> mnist = recipe.for_images("glyph")  # Outlier Exposure's MNIST recipe
        >>> mnist.epochs, mnist.lr, mnist.weight_decay, mnist.batch
        (5, 0.01, 0.0, (50, 100))
        >>> mnist.schedule(exact=True)["scheduler"], mnist.schedule(exact=True)["negatives_per_batch"]
        ('cosine-per-step', 100)
    """

    # the registered approach whose trained network (its best checkpoint) gives the initial weights
    start: str
    epochs: int  # how many epochs the fine-tuning trains
    lr: float  # its learning rate
    # its learning-rate schedule, a value of the config key scheduler: none, cosine, step, onecycle,
    # cosine-per-step (the authors' code: Outlier Exposure's, stepped after every step down to 1e-6)
    scheduler: str
    source: str  # where the recipe comes from (the paper and its section, the authors' code)
    differs: str = ""  # what is different here from that source besides batches and schedule ("": nothing)
    optimizer: str = "sgd"  # a value of the config key optimizer: the authors' code fine-tunes with SGD
    weight_decay: float = 5e-4  # the optimizer's L2 penalty
    # the knowns and the negatives of one step: the authors' code draws a batch of each
    batch: Tuple[int, int] = (128, 256)
    # the authors' recipe for grey glyph images (MNIST) where it is another; None: this one
    glyphs: Optional["FineTune"] = None
    # the peak lr and batch size the authors' start network trained with (None: ``differs`` says it):
    # the fine-tune's lr means something only against the start network's lr per sample
    start_lr: Optional[Tuple[float, int]] = None

    def for_images(self, kind: str) -> "FineTune":
        """The recipe for a protocol whose images are of ``kind``.

        Args:
            kind: the kind of images of the protocol's input, ``glyph`` or ``natural``
                (the ``kind`` of the protocol's ``InputSpec``).

        Returns:
            ``glyphs`` for glyphs where declared, else this recipe.
        """
        return self.glyphs if kind == "glyph" and self.glyphs is not None else self

    def schedule(self, epochs: Optional[int] = None, exact: bool = False) -> Dict:
        """The config keys the recipe sets over the run's.

        Args:
            epochs: replaces the recipe's epochs where given (the config's ``fine_tune_epochs``).
            exact: the authors' batches and schedule (the config's ``fine_tune_exact``): a batch of
                ``batch[0]`` knowns and ``batch[1]`` negatives, ``scheduler`` as declared; else
                the run's batches and a cosine stepped per epoch.

        Returns:
            ``epochs``, ``lr``, ``scheduler``, ``optimizer``, ``weight_decay``, and with ``exact``
            ``batch_size`` and ``negatives_per_batch``.
        """
        keys = {"epochs": self.epochs if epochs is None else epochs, "lr": self.lr,
                "scheduler": self.scheduler if exact else SHARED_BATCHES_SCHEDULER,
                "optimizer": self.optimizer, "weight_decay": self.weight_decay}
        if exact:
            keys.update(batch_size=sum(self.batch), negatives_per_batch=self.batch[1])
        return keys

    def departures(self, exact: bool = False, epochs: Optional[int] = None,
                   start: Optional[Tuple[float, int]] = None, keep: Optional[str] = None) -> str:
        """What the run does unlike the authors' code.

        Args:
            exact: whether the run trains with the authors' batches and schedule (the config's
                ``fine_tune_exact``).
            epochs: the epochs the run trains where a config sets them (``fine_tune_epochs``); None:
                the recipe's.
            start: the peak lr and batch size the run's start network trained with (None: not
                compared); against ``start_lr``, where the recipe declares it.
            keep: the checkpoint the run keeps (the config's ``keep_checkpoint``; None: not
                compared). Outlier Exposure's ``oe_tune.py``, the code the glyph recipes cite, saves each
                epoch over the last and so keeps the last epoch's; another rule is named as a departure.

        Returns:
            Without ``exact`` the shared batches and the per-epoch cosine, then ``differs``, then
            the start network's lr per sample where it is not the authors' (more than 5 % apart),
            then epochs other than the recipe's, then a checkpoint other than the last epoch's,
            joined by "; " ("": nothing departs).
        """
        shared = "" if exact else (
            f"the cosine schedule steps once per epoch to lr · (1 + cos(π (E-1)/E)) / 2 in the last epoch, the "
            f"authors' once per step down to 10⁻⁶; knowns and negatives share batches of the run's size, the "
            f"authors draw a batch of each ({self.batch[0]} + {self.batch[1]}; fine_tune_exact: true trains so)")
        shortened = (f"{epochs} epoch(s) (the config's fine_tune_epochs), the authors' {self.epochs}"
                     if epochs not in (None, self.epochs) else "")
        kept = (f"keeps the epoch of the lowest validation loss (keep_checkpoint: {keep}), the authors' code the "
                f"last epoch" if keep not in (None, "last") else "")
        return "; ".join(part for part in (shared, self.differs, self._start_departs(start), shortened, kept) if part)

    def _start_departs(self, start: Optional[Tuple[float, int]]) -> str:
        """The start network's lr per sample against the authors' baseline's ("": the same, or not known)."""
        if start is None or self.start_lr is None:
            return ""
        (lr, batch), (theirs, their_batch) = start, self.start_lr
        ratio = (theirs / their_batch) / (lr / batch)
        if abs(ratio - 1) <= 0.05:
            return ""
        return (f"the start network trained at a peak lr of {lr:g} on batches of {batch}, the authors' baseline at "
                f"{theirs:g} on {their_batch}: against its lr per sample the fine-tune's lr {self.lr:g} is "
                f"{ratio:.2g}× what it is in their code")
