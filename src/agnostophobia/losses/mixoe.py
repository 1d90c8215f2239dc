"""Mixture Outlier Exposure (Zhang, Inkawhich, Linderman, Chen, Chen and Li, "Mixture Outlier
Exposure: Towards Out-of-Distribution Detection in Fine-grained Environments", WACV 2023, Sec. 3)."""
from __future__ import annotations

import math
from typing import Optional

import torch

from ..settings import Setting
from ._base import LOSSES, OpenSetLoss
from .recipes import FineTune, auxiliary_outliers, from_scratch
from .outlier_exposure import glyph_recipe_at_own_lr

MIXES = ("mixup", "cutmix")


@LOSSES.register("mixoe")
class MixOELoss(OpenSetLoss):
    r"""MixOE (Zhang et al., WACV 2023, Sec. 3): each negative of a batch is mixed with a known
    partner, and the mixture is trained towards the correspondingly mixed target, between the
    partner's one-hot label and uniform.

    .. math::

        \tilde x = \lambda x_{in} + (1-\lambda) x_{out}\ (\text{mixup}) \ \text{or}\
            M \odot x_{in} + (1 - M) \odot x_{out}\ (\text{cutmix, } \lambda = \text{area of } M),
        \qquad \tilde y = \lambda\, e_{y_{in}} + (1-\lambda)\,\tfrac{1}{C}\mathbf{1},

        \mathcal{L} = \mathbb{E}_{D_c'}\bigl[-\log S_y(x)\bigr]
            + \beta\,\mathbb{E}\Bigl[-\sum_c \tilde y_c \log S_c(\tilde x)\Bigr],
        \qquad \lambda \sim \mathrm{Beta}(\alpha, \alpha)\ \text{once per batch}.

    The mixing is the loss's batch hook (:meth:`mix_batch`), which the trainer calls on each
    training batch before the network sees it: the negatives' inputs are replaced by their
    mixtures (the batch keeps its size; a negative's partner is a known of the same batch, drawn at
    random, cycling when there are more negatives than knowns) and :meth:`forward` reads the
    partners and λ it kept. Outside training (validation, a plain call) a negative is an unmixed
    outlier, λ = 0: the term is β times Outlier Exposure's. A batch without knowns is left unmixed.
    Each expectation is a mean over its own samples (``mean_per_term``). Defaults α = 1, β = 5,
    mixup; ``tune`` searches the grids. Thresholded by the maximum softmax probability.

    The draws (λ and the cutmix box on the host, from torch's global generator; the partners on
    the device) make each step depend on the step before: its seeds train one by one
    (``batches_over_seeds = False``), and its step is not captured in a CUDA graph.

    Examples:
        >>> import torch
        >>> from agnostophobia.losses import MixOELoss
        >>> _ = torch.manual_seed(0)
        >>> loss = MixOELoss(num_classes=3, mix_weight=1.0)
        >>> images, labels = torch.rand(4, 1, 8, 8), torch.tensor([0, 1, -1, -1])
        >>> mixed = loss.mix_batch(images, labels)  # the negatives mixed with known partners
        >>> mixed.shape, bool(torch.equal(mixed[:2], images[:2]))
        (torch.Size([4, 1, 8, 8]), True)
        >>> loss.eval()(torch.zeros(4, 3), labels).item() > 0  # outside training: an unmixed outlier term
        True
    """

    title = "MixOE"
    trains_on_unknowns = True
    mean_per_term = True
    default_detector = "softmax"
    batches_over_seeds = False
    replays_in_cuda_graph = False  # a replay would repeat the captured step's λ and box
    mix = Setting(str, "mixup", choices=MIXES, grid=MIXES, doc="how a negative is mixed with a known",
                  source="zjysteven/MixOE, scripts/train.sh (the Car example): one run with ``--mix-op mixup``, "
                         "one with ``--mix-op cutmix``; train/train_mixoe.py has no default (``required=True``); "
                         "OpenOOD ``train_mixoe.yml``: ``mix_op: cutmix``",
                  differs="OpenOOD uses cutmix")
    mix_alpha = Setting(float, 1.0, low=0, low_open=True, grid=(0.5, 1.0, 2.0),
                        doc="α of the Beta(α, α) distribution λ is drawn from",
                        source="zjysteven/MixOE, scripts/train.sh: ``--alpha 1.0`` with mixup, ``--alpha 2.0`` "
                               "with cutmix (train_mixoe.py default 1.0; λ ~ Beta(α, α)); OpenOOD "
                               "``train_mixoe.yml``: ``alpha: 0.1``, ``beta: 1.0``, drawn as Beta(0.1, 1.0) "
                               "(``mixoe_trainer.py``); paper's per-dataset values not confirmed",
                        differs="OpenOOD draws λ from Beta(0.1, 1), mostly near 0 (mostly outlier); the authors' "
                                "cutmix run uses α = 2")
    mix_weight = Setting(float, 5.0, low=0, grid=(1.0, 5.0, 10.0), doc="β, the weight of the mixed term",
                         source="zjysteven/MixOE, scripts/train.sh: ``--beta 5.0`` for both mixes (train_mixoe.py "
                                "default 1.0); OpenOOD ``train_mixoe.yml``: ``lambda_oe: 1.0``",
                         differs="OpenOOD weighs the mixed term 1; the authors note the example is for Car and "
                                 "other datasets need their own values")
    scratch_recipe = from_scratch(
        "zjysteven/MixOE, train/train_mixoe.py and OpenOOD (scripts/ood/mixoe/cifar10_train_mixoe.sh: "
        "``--network.pretrained True``) fine-tune a trained network; a from-scratch schedule of theirs: "
        "not confirmed",
        "not the authors' or OpenOOD's recipe (that is ``mixoe-ft``)")
    provenance = (auxiliary_outliers("WebVision (``--oe-set WebVision``); OpenOOD: its Tiny ImageNet subset "
                                     "(``train_tin597.txt`` in ``cifar10_oe.yml``)"),)

    def __post_init__(self):
        self._partners: Optional[torch.Tensor] = None  # each row's known partner's label (-1: unmixed)
        self._share = 0.0                               # λ, the known partner's share of the mixture

    def mix_batch(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """``x`` with each negative replaced by its mixture with a known partner (no host sync).

        Args:
            x: the (N, C, H, W) inputs of one training batch.
            labels: their (N,) labels, >= 0 known, < 0 negative.

        Returns:
            A tensor of ``x``'s shape and dtype: the knowns' rows as they were, each negative's
            row its mixture with its partner (unchanged when the batch has no known).
        """
        share = float(torch.distributions.Beta(self.mix_alpha, self.mix_alpha).sample())
        known = labels >= 0
        # knowns first, in random order; row i's partner is the (i mod K)-th of them
        order = torch.argsort(torch.rand(labels.shape, device=labels.device) + (~known).to(torch.float32))
        count = known.sum().clamp(min=1)
        partner = order[torch.arange(labels.shape[0], device=labels.device) % count]
        mixed_rows = ~known & known.any()
        if self.mix == "mixup":
            mixed = share * x[partner] + (1 - share) * x
        else:
            mixed, share = self._cutmix(x[partner], x, share)
        self._partners = torch.where(mixed_rows, labels[partner], torch.full_like(labels, -1))
        self._share = share
        return torch.where(mixed_rows.view(-1, *([1] * (x.dim() - 1))), mixed, x)

    @staticmethod
    def _cutmix(inner: torch.Tensor, outer: torch.Tensor, share: float):
        """``inner`` with a box of ``outer`` pasted in (box area ≈ 1 - share, centre uniform, clipped
        to the image), and the share of ``inner`` left: the box's exact complement."""
        height, width = inner.shape[-2:]
        ratio = math.sqrt(1.0 - share)
        centre_y, centre_x = (int(torch.randint(size, ())) for size in (height, width))
        top, bottom = max(centre_y - int(height * ratio) // 2, 0), min(centre_y + int(height * ratio) // 2, height)
        left, right = max(centre_x - int(width * ratio) // 2, 0), min(centre_x + int(width * ratio) // 2, width)
        mixed = inner.clone()
        mixed[..., top:bottom, left:right] = outer[..., top:bottom, left:right]
        return mixed, 1.0 - (bottom - top) * (right - left) / (height * width)

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, sample_weight=None) -> torch.Tensor:
        logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
        log_p = torch.log_softmax(logits, dim=1)
        known = labels >= 0
        partners = self._partners if self.training and self._partners is not None \
            and self._partners.shape == labels.shape else torch.full_like(labels, -1)
        share = torch.where(partners >= 0, torch.full_like(log_p[:, 0], self._share), torch.zeros_like(log_p[:, 0]))
        target_log_p = log_p.gather(1, torch.where(known, labels, partners).clamp(min=0).unsqueeze(1)).squeeze(1)
        mixed_term = self.mix_weight * (-share * target_log_p - (1 - share) * log_p.mean(dim=1))
        return self._reduce(torch.where(known, -target_log_p, mixed_term), labels, weight)


@LOSSES.register("mixoe-ft")
class MixOEFineTuned(MixOELoss):
    r"""MixOE as its paper trains it (Zhang et al., WACV 2023): the same loss, starting from the same
    seed's trained softmax network, 10 epochs at learning rate 10⁻³ with cosine decay (OpenOOD's
    scripts/ood/mixoe: a pretrained checkpoint, lr 0.001, 10 epochs). ``mixoe`` is the same loss
    trained from scratch.
    The loss is :class:`~agnostophobia.losses.MixOELoss`'s :math:`\mathcal{L}`, minimised from the start network's weights
    :math:`\theta_0 = \theta_{\mathrm{softmax}}` instead of a random initialisation.

    Examples:
        >>> from agnostophobia.losses import LOSSES
        >>> recipe = LOSSES.get("mixoe-ft").fine_tune  # what it starts from, and how it trains
        >>> recipe.start, recipe.epochs, recipe.lr, recipe.scheduler, recipe.weight_decay
        ('softmax', 10, 0.001, 'cosine-per-step', 1e-05)
    """

    title = "MixOE (fine-tuned)"
    fine_tune = FineTune("softmax", epochs=10, lr=1e-3, scheduler="cosine-per-step", optimizer="sgd",
                         weight_decay=1e-5, batch=(128, 128),
                         source="Zhang et al. (WACV 2023); zjysteven/MixOE, train/train_mixoe.py: loads the "
                                "baseline checkpoint, ``--epochs 10``, ``--lr 0.001``, SGD momentum 0.9 Nesterov, "
                                "``--decay 0.00001``, cosine per step to 10⁻⁶, as many negatives a step as "
                                "knowns (``--batch-size 32`` for both on its fine-grained sets); OpenOOD "
                                "scripts/ood/mixoe/cifar10_train_mixoe.sh: ``--network.pretrained True``, "
                                "``--optimizer.lr 0.001``, ``--optimizer.num_epochs 10``, "
                                "``--dataset.train.batch_size 128``, ``--dataset.oe.batch_size 128``; its "
                                "baseline: configs/pipelines/train/baseline.yml, lr 0.1, and "
                                "configs/datasets/cifar10/cifar10.yml, batch 128",
                         start_lr=(0.1, 128),
                         differs="the authors ran fine-grained sets only: mixup, α = 1 and β = 5 are their Car "
                                 "example's (scripts/train.sh), which they say other datasets must set anew; "
                                 "OpenOOD's CIFAR-10 run mixes by cutmix with its Beta(0.1, 1.0) and β = 1",
                         glyphs=glyph_recipe_at_own_lr("fine-grained sets", oe_code="train/train_oe.py",
                                                       negatives=50))
