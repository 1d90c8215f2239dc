"""Outlier Exposure (Hendrycks, Mazeika and Dietterich, "Deep Anomaly Detection with Outlier
Exposure", ICLR 2019, Sec. 3 and 4.2)."""
from __future__ import annotations

import torch

from ..settings import Setting
from ._base import LOSSES, OpenSetLoss
from .recipes import FineTune, auxiliary_outliers, from_scratch
from .entropic import entropic_per_sample

AVERAGES = ("per-term", "batch")


#: Outlier Exposure's fine-tune on MNIST, the one MNIST recipe of the three fine-tuning papers: the
#: fine-tunes of a protocol of glyph images (``lenet++``) train with it.
OE_MNIST_RECIPE = FineTune("softmax", epochs=5, lr=1e-2, scheduler="cosine-per-step", optimizer="sgd", weight_decay=0.0,
                           batch=(50, 100),
                           source="hendrycks/outlier-exposure, MNIST/oe_tune.py: loads the baseline of "
                                  "MNIST/baseline.py (SGD at lr 0.01, 10 epochs), ``--epochs 5``, "
                                  "``--learning_rate 0.01`` (the baseline's own), SGD momentum 0.9 Nesterov, "
                                  "no weight decay, cosine per step to 10⁻⁶, ``--batch_size 50``, "
                                  "``--oe_batch_size 100``",
                           differs="the network here trained with Adam (a peak lr of 3·10⁻³ on LeNet++), the "
                                   "authors' with SGD at the fine-tune's lr")

#: Why the energy and MixOE fine-tunes on glyphs keep their authors' own learning rate, 10⁻³, in OE's MNIST
#: recipe: measured with benchmarks/fine_tune_lr_stability.py from a LeNet++ softmax network of the
#: ``converged`` budget (seed 0), 200 SGD steps of 128 from the same start at each lr.
OWN_LR_ON_GLYPHS = ("at its authors' own fine-tune lr 10⁻³, not OE's MNIST lr 10⁻²: from a converged LeNet++ "
                    "softmax network (large logits: its negatives' free energy -16 on average, a tenth under -36,"
                    " against the margin m_out = -5), the energy loss's NaN came at step 8 and MixOE's at step 28"
                    " at 10⁻², while both train at 10⁻³ (energy 66 to 1.2, MixOE 27 to 11 in 200 steps) and OE's "
                    "own loss trains at either")


def glyph_recipe_at_own_lr(authors_ran: str, oe_code: str = "", negatives: int = 100) -> FineTune:
    """The glyph recipe of a fine-tune whose authors ran no MNIST but extend Outlier Exposure's code:
    ``OE_MNIST_RECIPE`` at their own lr 10⁻³ (``OWN_LR_ON_GLYPHS``), its ``differs`` naming
    what they ran (``authors_ran``) and the file of OE's code theirs extends (``oe_code``; "": unnamed);
    ``negatives`` a step beside OE's 50 knowns (MixOE draws as many negatives as knowns)."""
    code = f" ({oe_code})" if oe_code else ""
    return OE_MNIST_RECIPE._replace(
        lr=1e-3, batch=(OE_MNIST_RECIPE.batch[0], negatives),
        differs=f"{OE_MNIST_RECIPE.differs}; the authors ran {authors_ran} only: this is Outlier "
                f"Exposure's MNIST recipe, whose code{code} theirs extends, {OWN_LR_ON_GLYPHS}")


@LOSSES.register("outlier-exposure")
class OutlierExposureLoss(OpenSetLoss):
    r"""Outlier Exposure: cross-entropy on the knowns plus λ times the cross-entropy from the
    softmax to the uniform distribution on the negatives (the paper's classification form, Sec. 4.2).

    .. math::

        \mathcal{L} = \mathbb{E}_{(x,y)\in D_c'}\bigl[-\log S_y(x)\bigr]
            + \lambda\,\mathbb{E}_{x\in D_b'}\Bigl[-\frac{1}{C}\sum_{c=1}^{C}\log S_c(x)\Bigr]

    The unknown term is Entropic Open-Set's (Eq. 1 of Dhamija et al.); what differs is the weight
    λ (the paper: 0.5 for vision) and that each expectation is a mean over its own samples
    (``mean_per_term``), as the authors' code averages the in- and out-of-distribution parts of a
    batch separately. A batch without negatives is plain cross-entropy; one without knowns is λ
    times the unknown term. ``outlier_average='batch'`` divides both terms by the batch size
    instead, as Entropic Open-Set does: with λ = 1 the loss is then EOS exactly, which is how the
    EOS-versus-OE ablation changes one factor at a time (docs/training-peers.md). The paper thresholds the maximum softmax probability (``softmax``).

    Call ``loss(logits, labels, features=None, sample_weight=None)`` (features are ignored);
    ``'none'`` gives each sample's own term (λ included), ``'sum'`` their sum.

    Examples:
        >>> import torch
        >>> from agnostophobia.losses import OutlierExposureLoss
        >>> loss = OutlierExposureLoss(num_classes=3, outlier_weight=0.5)
        >>> logits = torch.tensor([[4.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
        >>> round(loss(logits, torch.tensor([0, -1])).item(), 4)  # known CE + 0.5 x the unknown's CE to uniform
        0.5853
    """

    title = "Outlier Exposure"
    trains_on_unknowns = True
    mean_per_term = True
    default_detector = "softmax"
    outlier_weight = Setting(float, 0.5, low=0, grid=(0.1, 0.5, 1.0),
                             doc="λ, the weight of the negatives' uniform cross-entropy (paper: 0.5)",
                             source="the paper's experiments: λ = 0.5 for vision (1.0 for NLP); "
                                    "hendrycks/outlier-exposure, CIFAR/oe_tune.py: ``loss += 0.5 * ...``; "
                                    "pytorch-ood ``OutlierExposureLoss(alpha=0.5)``; OpenOOD ``train_oe.yml``: "
                                    "``lambda_oe: 0.5``")
    outlier_average = Setting(str, "per-term", choices=AVERAGES, grid=AVERAGES,
                              doc="'per-term': each term a mean over its own samples (the paper's "
                                  "code); 'batch': both over the whole batch, as Entropic Open-Set",
                              source="hendrycks/outlier-exposure, CIFAR/oe_tune.py: the in-term and the out-term "
                                     "are each ``.mean()`` over their own samples; OpenOOD ``oe_trainer.py`` the same",
                              differs="pytorch-ood's ``'mean'`` divides by the whole batch (see the table under "
                                      "\"Tests\")")
    scratch_recipe = from_scratch(
        "hendrycks/outlier-exposure, CIFAR/oe_scratch.py (100 epochs, lr 0.1); OpenOOD v1.5 trains OE from scratch "
        "(scripts/ood/oe/cifar10_train_oe.sh with ``baseline.yml``: 100 epochs, lr 0.1, ``pretrained: False``)",
        "OpenOOD's from-scratch recipe at our budget's length; the paper's is ``outlier-exposure-ft``")
    provenance = (auxiliary_outliers("80 Million Tiny Images (``TinyImages`` in CIFAR/oe_tune.py); OpenOOD: its Tiny "
                                     "ImageNet subset (``train_tin597.txt`` in ``cifar10_oe.yml``)"),)

    def __post_init__(self):
        self.mean_per_term = self.outlier_average == "per-term"

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, sample_weight=None) -> torch.Tensor:
        logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
        scale = torch.where(labels >= 0, torch.ones_like(logits[:, 0]), torch.full_like(logits[:, 0],
                                                                                          self.outlier_weight))
        return self._reduce(scale * entropic_per_sample(logits, labels), labels, weight)


@LOSSES.register("outlier-exposure-ft")
class OutlierExposureFineTuned(OutlierExposureLoss):
    r"""Outlier Exposure as its paper trains it (Sec. 4.2, "fine-tuning"): the same loss, starting from
    the same seed's trained softmax network, 10 epochs at learning rate 10⁻³ with cosine decay (the
    authors' code, hendrycks/outlier-exposure: CIFAR/oe_tune.py). ``outlier-exposure`` is the same
    loss trained from scratch, as the authors' CIFAR/oe_scratch.py and OpenOOD's OE recipe train it.
    The loss is :class:`~agnostophobia.losses.OutlierExposureLoss`'s :math:`\mathcal{L}`, minimised from the start network's weights
    :math:`\theta_0 = \theta_{\mathrm{softmax}}` instead of a random initialisation.

    Examples:
        >>> from agnostophobia.losses import LOSSES
        >>> recipe = LOSSES.get("outlier-exposure-ft").fine_tune  # what it starts from, and how it trains
        >>> recipe.start, recipe.epochs, recipe.lr, recipe.scheduler, recipe.optimizer
        ('softmax', 10, 0.001, 'cosine-per-step', 'sgd')
        >>> recipe.for_images("glyph").epochs  # on MNIST: the authors' MNIST/oe_tune.py
        5
    """

    title = "Outlier Exposure (fine-tuned)"
    fine_tune = FineTune("softmax", epochs=10, lr=1e-3, scheduler="cosine-per-step", optimizer="sgd",
                         weight_decay=5e-4, batch=(128, 256),
                         source="Hendrycks et al. (ICLR 2019) Sec. 4.2 and App. A; hendrycks/outlier-exposure, "
                                "CIFAR/oe_tune.py: loads the pretrained baseline (trained at lr 0.1), ``--epochs 10``, "
                                "``--learning_rate 0.001``, SGD momentum 0.9 Nesterov, ``--decay 0.0005``, cosine "
                                "per step to 10⁻⁶, ``--batch_size 128``, ``--oe_batch_size 256``; the baseline: "
                                "CIFAR/baseline.py, ``--learning_rate 0.1``, ``--batch_size 128``",
                         start_lr=(0.1, 128), glyphs=OE_MNIST_RECIPE)
