"""Virtual Outlier Synthesis (Du, Wang, Cai and Li, "VOS: Learning What You Don't Know by Virtual
Outlier Synthesis", ICLR 2022, Sec. 3, Eqs. 1-6)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..settings import Setting
from ._base import LOSSES, OpenSetLoss
from .recipes import from_scratch

#: Added to the shared covariance's diagonal, as the authors do, so that it stays invertible.
COVARIANCE_RIDGE = 1e-4


@LOSSES.register("vos")
class VOSLoss(OpenSetLoss):
    r"""VOS: cross-entropy on the knowns plus an uncertainty loss that tells the knowns' energies
    from those of virtual outliers sampled in feature space.

    Each class keeps a queue of its last ``queue_size`` deep features (detached). Once every queue
    is full and training has passed the declared fraction ``vos_start`` of its epochs (the paper:
    epoch 40 of 100), each step fits class-conditional Gaussians with one shared covariance,
    :math:`\mathcal{N}(\hat\mu_c, \hat\Sigma)` (Eq. 1-2; :math:`\hat\Sigma` + 1e-4 I), draws
    ``candidates`` features per class and keeps the ``selected`` least likely of each (Eq. 3) as
    virtual outliers v. Their logits come from the network's own logit layer (:meth:`attach`).
    With the weighted energy score :math:`s(x) = \log\sum_c \mathrm{ReLU}(w_c)\, e^{z_c(x)}` and a
    logistic regression :math:`\phi` (a Linear(1, 2)), both trained with the network:

    .. math::

        \mathcal{L} = \mathbb{E}_{D_c'}\bigl[-\log S_y(x)\bigr] + \beta\,\mathcal{L}_{unc},\qquad
        \mathcal{L}_{unc} = \mathrm{CE}\bigl(\phi(s(x)), 1\bigr)_{x \in \text{batch}}
                          \cup \mathrm{CE}\bigl(\phi(s(v)), 0\bigr)_{v},

    the cross-entropy of φ averaged over the batch's knowns and the virtual outliers together (Eq. 5-6,
    as the authors' code does it). β = 0.1. Under a shared covariance the least likely samples are
    those of largest Mahalanobis distance, i.e. of the largest standard-normal draw :math:`\|z\|`
    where :math:`v = \hat\mu_c + L z`, :math:`LL^\top = \hat\Sigma`: the selection needs no density.

    Trained on knowns alone (negatives add 0; ``'mean'`` over the knowns); :math:`\mathcal{L}_{unc}`
    is one number per batch, added to each known's loss. Outside training (validation) the loss is
    the cross-entropy alone and the queues stay as they are. Thresholded by the energy (``energy``).
    The queues, w and φ are the loss's state and parameters: trained with the network and kept in
    ``last.pt``; a run resumes them exactly. Its seeds train one by one (``batches_over_seeds``), and
    its step is not captured in a CUDA graph (``replays_in_cuda_graph``).

    Examples:
        >>> import torch
        >>> from agnostophobia.losses import VOSLoss
        >>> loss = VOSLoss(num_classes=3, queue_size=4)
        >>> logits, features = torch.zeros(2, 3), torch.randn(2, 5)
        >>> round(loss(logits, torch.tensor([0, 2]), features=features).item(), 4)  # queues not full yet: the cross-entropy alone
        1.0986
    """

    title = "VOS"
    uses_features = True
    trains_on_unknowns = False
    default_detector = "energy"
    batches_over_seeds = False
    replays_in_cuda_graph = False  # whether it synthesises changes at an epoch, a captured step would not
    vos_weight = Setting(float, 0.1, low=0, grid=(0.05, 0.1, 0.5), doc="β, the weight of the uncertainty loss",
                         source="deeplearning-wisc/vos, classification/CIFAR/train_virtual.py: "
                                "``--loss_weight 0.1``; pytorch-ood ``VOSRegLoss(alpha=0.1)``; OpenOOD "
                                "``train_vos.yml``: ``loss_weight: 0.1``")
    vos_start = Setting(float, 0.4, low=0, high=1, grid=(0.2, 0.4, 0.6),
                        doc="the fraction of the epochs after which outliers are synthesised (paper: 40/100)",
                        source="train_virtual.py: ``--start_epoch 40`` of ``--epochs 100``; OpenOOD "
                               "``train_vos.yml``: ``start_epoch: 0``; pytorch-ood has no start (outliers once "
                               "the queues are full); paper: not confirmed",
                        differs="a fraction, so that 40 of 100 carries over to short budgets; OpenOOD synthesises "
                                "from the first epoch")
    queue_size = Setting(int, 1000, low=1, grid=(200, 1000), doc="features kept per class",
                         source="train_virtual.py: ``--sample_number 1000``; the paper's object-detection setup: "
                                "1,000 samples per class; pytorch-ood ``sample_number=1000``; OpenOOD "
                                "``sample_number: 1000``")
    candidates = Setting(int, 10000, low=1, grid=(1000, 10000), doc="features drawn per class and step",
                         source="train_virtual.py: ``--sample_from 10000``; pytorch-ood ``sample_from=10000``; "
                                "OpenOOD ``sample_from: 10000``")
    selected = Setting(int, 1, low=1, grid=(1, 5), doc="the least likely draws kept per class",
                       source="train_virtual.py: ``--select 1``; pytorch-ood ``select=1``; OpenOOD ``select: 1``")
    scratch_recipe = from_scratch("train_virtual.py: 100 epochs from scratch, lr 0.1; OpenOOD ``train_vos.yml``: "
                                  "100 epochs, lr 0.1",
                                  "shorter budgets here; the start, a fraction of the epochs, keeps the 40 %")

    def __post_init__(self):
        if self.selected > self.candidates:
            raise ValueError(f"selected ({self.selected}) must be <= candidates ({self.candidates})")
        self.energy_weights = nn.Parameter(torch.rand(self.num_classes))  # w, uniform in [0, 1) as the authors'
        self.uncertainty = nn.Linear(1, 2)                                  # φ
        self.register_buffer("queue", torch.zeros(self.num_classes, self.queue_size, 0))
        self.register_buffer("filled", torch.zeros(self.num_classes, dtype=torch.long))
        self.synthesising = False
        self.__dict__["_head"] = None  # the network's logit layer; not a submodule (the model owns it)

    def attach(self, model: nn.Module) -> "VOSLoss":
        """Read the network's logit layer, which scores the virtual outliers, and size the
        feature queues to its input.

        Args:
            model: the network the loss trains; its ``logits`` is an ``nn.Linear``.

        Returns:
            The loss itself, ``self``.

        Raises:
            ConfigError: the model has no ``logits`` attribute that is an ``nn.Linear``.
        """
        head = getattr(model, "logits", None)
        if not isinstance(head, nn.Linear):
            raise ConfigError(f"vos: the model {type(model).__name__} has no logit layer 'logits' (an nn.Linear from "
                              f"the deep features), which VOS needs to score its virtual outliers")
        self.__dict__["_head"] = head
        self._size_queue(head.in_features, head.weight.dtype)
        return self

    def begin_epoch(self, epoch: int, epochs: int) -> None:
        """Synthesise virtual outliers from epoch ``round(vos_start * epochs)`` on.

        Args:
            epoch: the epoch about to train, from 0.
            epochs: the run's number of epochs.
        """
        self.synthesising = epoch >= round(self.vos_start * epochs)

    def _size_queue(self, width: int, dtype: torch.dtype) -> None:
        if self.queue.shape[-1] != width:
            self.queue = torch.zeros(self.num_classes, self.queue_size, width, dtype=dtype, device=self.queue.device)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        saved = state_dict.get(prefix + "queue")
        if saved is not None:  # a checkpoint's queue has its features' width, a fresh one may not yet
            self._size_queue(saved.shape[-1], saved.dtype)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, features: torch.Tensor = None,
                sample_weight=None) -> torch.Tensor:
        logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
        features = self._check_features(features, logits)
        known = labels >= 0
        nll = F.cross_entropy(logits, torch.where(known, labels, torch.zeros_like(labels)), reduction="none")
        per_sample = torch.where(known, nll, torch.zeros_like(nll))
        if self.training:
            self._size_queue(features.shape[1], features.dtype)
            self._enqueue(features.detach().to(self.queue.dtype), labels)
            if self.synthesising:
                if self._head is None:
                    raise ValueError("vos: synthesising outliers needs the network's logit layer; call attach(model)")
                outlier_logits = self._head(self._virtual_outliers().to(logits.dtype))
                full = (self.filled == self.queue_size).all()  # no outliers until every queue is full
                uncertainty = torch.where(full, self.uncertainty_loss(logits, known, outlier_logits), 0.0)
                per_sample = per_sample + torch.where(known, self.vos_weight * uncertainty, torch.zeros_like(nll))
        return self._reduce(per_sample, labels, weight)

    def _enqueue(self, features: torch.Tensor, labels: torch.Tensor) -> None:
        """Push each known's features onto its class's queue, dropping the oldest (no host sync)."""
        classes, size = self.num_classes, self.queue_size
        count_in_batch = labels.shape[0]
        member = labels[:, None] == torch.arange(classes, device=labels.device)[None, :]  # (N, C); negatives: none
        rank = (member.cumsum(0) - 1).clamp(min=0).gather(1, labels.clamp(min=0)[:, None]).squeeze(1)
        rows = torch.arange(count_in_batch, device=labels.device)
        known = labels >= 0
        # old queue, then this batch's features of each class; negatives go to a spare row of their own
        extended = torch.cat([self.queue, self.queue.new_zeros(classes, count_in_batch, self.queue.shape[-1])], 1)
        extended = torch.cat([extended, extended.new_zeros(1, *extended.shape[1:])], 0)
        extended[torch.where(known, labels, torch.full_like(labels, classes)),
                 torch.where(known, size + rank, size + rows)] = features
        added = member.sum(0)
        keep = added[:, None] + torch.arange(size, device=labels.device)[None, :]  # the last `size` of each class
        self.queue = extended[:classes].gather(1, keep[..., None].expand(-1, -1, self.queue.shape[-1]))
        self.filled = (self.filled + added).clamp(max=size)

    def uncertainty_loss(self, logits: torch.Tensor, known: torch.Tensor, outlier_logits: torch.Tensor) -> torch.Tensor:
        """L_unc: φ's cross-entropy, 1 for the batch's knowns (``known`` marks them among ``logits``' rows)
        and 0 for the virtual outliers (``outlier_logits``), averaged over both together.

        Args:
            logits: the (N, C) logits of the batch.
            known: the (N,) boolean mask of its knowns.
            outlier_logits: the (M, C) logits of the virtual outliers.

        Returns:
            A 0-dim float tensor, differentiable with respect to the logits, ``w`` and φ.
        """
        scores = torch.cat([self.energy_score(logits), self.energy_score(outlier_logits)])
        outlier = torch.zeros(len(outlier_logits), dtype=torch.long, device=logits.device)
        targets = torch.cat([torch.ones_like(known, dtype=torch.long), outlier])
        counted = torch.cat([known, outlier == 0])
        per_row = F.cross_entropy(self.uncertainty(scores[:, None]), targets, reduction="none")
        return torch.where(counted, per_row, torch.zeros_like(per_row)).sum() / counted.sum().to(per_row.dtype)

    def energy_score(self, logits: torch.Tensor) -> torch.Tensor:
        r""":math:`s = \log\sum_c \mathrm{ReLU}(w_c) e^{z_c}` (the negative of the weighted free energy).

        Args:
            logits: the (N, C) logits.

        Returns:
            The (N,) float tensor of scores of the (N, C) ``logits``, larger = more known.
        """
        top = logits.max(dim=1, keepdim=True).values.detach()
        return top.squeeze(1) + torch.log((F.relu(self.energy_weights) * torch.exp(logits - top)).sum(1))

    def _virtual_outliers(self) -> torch.Tensor:
        """The ``selected`` least likely of ``candidates`` draws per class, (C * selected, M)."""
        means = self.queue.mean(dim=1)                                        # (C, M)
        centred = (self.queue - means[:, None]).reshape(-1, self.queue.shape[-1])
        width = centred.shape[1]
        covariance = centred.T @ centred / centred.shape[0] + COVARIANCE_RIDGE * torch.eye(
            width, dtype=centred.dtype, device=centred.device)
        lower = torch.linalg.cholesky_ex(covariance).L
        draws = torch.randn(self.num_classes, self.candidates, width, dtype=centred.dtype, device=centred.device)
        farthest = draws.pow(2).sum(-1).topk(self.selected, dim=1).indices    # (C, selected)
        chosen = draws.gather(1, farthest[..., None].expand(-1, -1, width))
        return (means[:, None] + chosen @ lower.T).reshape(-1, width)
