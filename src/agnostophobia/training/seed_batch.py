"""Seeds trained as one batched model (issue 21; config key ``batched_seeds``).

The runs of one approach that differ only in their seed have networks of the same shape. PyTorch's
model-ensembling recipe (``torch.func.stack_module_state`` + ``vmap`` + ``functional_call``) trains
them as one: every parameter and buffer gets a leading seed dimension, and one call of the network
(and of the loss) computes all seeds at once, so a GPU launches each kernel once for S seeds instead
of S times. Nothing else is shared:

* each seed keeps its own initialisation (built after ``seed_everything(seed)``, as a separate run
  builds it), data order (``epoch_order(n, seed, epoch)``) and augmentation draws (its own generator);
* the optimiser works element by element (Adam, SGD with momentum, weight decay), so one optimiser
  over the stacked parameters makes exactly the S updates S optimisers would; the loss the trainer
  differentiates is the sum of the seeds' losses, and seed s's loss depends only on seed s's
  parameters, so each seed receives its own gradient;
* BatchNorm computes its statistics per seed, its running statistics are stacked buffers.

On the CPU in fp32 a batched run therefore equals separate runs up to the rounding of the
batched kernels (``tests/training/test_seed_batch.py`` states and checks the tolerance). A model with
random layers (dropout) draws from one generator for all seeds under ``vmap`` (``randomness=
"different"``): valid, but not equal to separate runs.

Each seed's checkpoints, outputs and metrics have the form of a separate run's
(:meth:`StackedSeeds.seed_state_dict`, :func:`seed_optimizer_state`), so a run can be resumed with
``batched_seeds`` on or off and more seeds added later.

The trainer holds its seeds through one interface, :func:`seed_layout`: :class:`OneSeed` (a separate
run: one network, DDP under torchrun) or :class:`SeedBatch` (S seeds stacked); the loop itself is
the same for both.
"""
from __future__ import annotations

import copy
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from agnostophobia.errors import ConfigError
from agnostophobia.training.auto_options import check_batched_seeds  # noqa: F401  (its home: light)
from agnostophobia.losses import LOSSES

#: Whether ``auto`` turns batching on with CUDA. Off until a GPU has shown the three things the
#: default waits for (benchmarks/gpu_check.sh measures them): its CUDA tests pass (H100,
#: 2026-11-27: yes); batched training images/s >= 1.2x separate runs (H100: x2.76 on the real
#: lenet++ data, x2.47 on synthetic); and at the cpu budget with 5 seeds each way, the batched
#: CCR at 1e-2 and 1e-1 within the separate seeds' mean +- max(2 std, 0.01) in >= 90 % of cells
#: (benchmarks/compare_batched_ccr.py) -- not yet measured.
BATCHED_BY_DEFAULT_ON_CUDA = False


def resolve_batched_seeds(value, device: torch.device, seeds: int, distributed: bool, streamed: bool) -> bool:
    """Whether the seeds of each approach train as one batched model.

    ``auto``: off for now, everywhere. With :data:`BATCHED_BY_DEFAULT_ON_CUDA` it turns on with CUDA
    and more than one seed (on a GPU one LeNet++ run leaves most of it idle; on a CPU the kernels
    are already large for its few cores, and runs in processes of their own, ``concurrent_runs``,
    gain more). Never under torchrun (DDP) or for a protocol streamed from image files; ``true``
    there is refused in one line.
    """
    value = check_batched_seeds(value)
    if value is True:
        if distributed:
            raise ConfigError("batched_seeds: true cannot run under torchrun (DDP): a batched model's "
                              "gradients are not DistributedDataParallel's; set batched_seeds: false")
        if streamed:
            raise ConfigError("batched_seeds: true cannot train a protocol streamed from image files "
                              "(its loader draws one seed's order and augmentation); set batched_seeds: false")
        return True
    if value is False:
        return False
    return (BATCHED_BY_DEFAULT_ON_CUDA and torch.device(device).type == "cuda" and seeds > 1 and not distributed
            and not streamed)


def batches_over_seeds(approach: str) -> bool:
    """Whether the loss of ``approach`` can train several seeds as one stacked model (``vmap``): not one
    whose step keeps state or draws on the host (VOS's feature queues, MixOE's mixing), which says so
    (``OpenSetLoss.batches_over_seeds``); ``batched_seeds`` trains such an approach's seeds one by one."""
    return LOSSES.get(approach).batches_over_seeds


class StackedSeeds(nn.Module):
    """S networks of one architecture as one module: parameters and buffers stacked along a new
    first dimension; :meth:`map` runs a function of one network on all S at once (``vmap``).

    ``models``: the seeds' networks, each built as a separate run builds it. Their structure is
    kept in :attr:`template` (not registered: its own weights are never trained) for
    ``functional_call`` and to hand out one seed's network (:meth:`seed_model`).
    """

    def __init__(self, models: Sequence[nn.Module]):
        super().__init__()
        if len(models) < 1:
            raise ValueError("StackedSeeds needs at least one model")
        params, buffers = stack_module_state(list(models))
        first = dict(models[0].named_parameters())
        self.param_names: List[str] = list(params)
        self.buffer_names: List[str] = list(buffers)
        self.stacked_params = nn.ParameterList(
            [nn.Parameter(params[name].detach().clone(), requires_grad=first[name].requires_grad)
             for name in self.param_names])
        for i, name in enumerate(self.buffer_names):
            self.register_buffer(f"stacked_buffer_{i}", buffers[name].detach().clone())
        self.__dict__["template"] = copy.deepcopy(models[0])  # outside nn.Module's registries
        self.state_keys = list(models[0].state_dict())
        self.seeds = len(models)

    # -- the seeds' parameters and buffers by their names in one network ----------------------
    def params(self) -> Dict[str, torch.Tensor]:
        return dict(zip(self.param_names, self.stacked_params))

    def buffers_by_name(self) -> Dict[str, torch.Tensor]:
        return {name: getattr(self, f"stacked_buffer_{i}") for i, name in enumerate(self.buffer_names)}

    def train(self, mode: bool = True) -> "StackedSeeds":
        super().train(mode)
        self.template.train(mode)  # the template's modes decide BatchNorm's (as its own train() sets them)
        return self

    def _apply(self, fn, *args, **kwargs):  # .to(device) and the like move the template too
        super()._apply(fn, *args, **kwargs)
        self.template._apply(fn, *args, **kwargs)
        return self

    def map(self, function: Callable, *args, in_dims: Sequence) -> object:
        """``function(network, *args_of_one_seed)`` for every seed at once. ``in_dims``: per arg, 0
        where it has a seed dimension, None where all seeds share it (e.g. validation images)."""

        def one_seed(params, buffers, *one_args):
            return function(lambda x: functional_call(self.template, (params, buffers), (x,)), *one_args)

        return vmap(one_seed, in_dims=(0, 0, *in_dims), randomness="different")(
            self.params(), self.buffers_by_name(), *args)

    def forward(self, x: torch.Tensor):
        """``(logits, features)``, each with a leading seed dimension, of ``x`` (S, N, ...)."""
        return self.map(lambda network, one: network(one), x, in_dims=(0,))

    # -- one seed as a separate run would hold it ----------------------------------------------
    def seed_state_dict(self, seed_index: int) -> Dict[str, torch.Tensor]:
        """Seed ``seed_index``'s state dict, keys and order as one network's ``state_dict()``."""
        tensors = {**self.params(), **self.buffers_by_name()}
        return {key: tensors[key][seed_index].detach().clone() for key in self.state_keys}

    @torch.no_grad()
    def load_seed_state_dict(self, seed_index: int, state: Dict[str, torch.Tensor], where: str = "") -> None:
        """Put one network's state dict (as a separate run saved it) in seed ``seed_index``'s place."""
        tensors = {**self.params(), **self.buffers_by_name()}
        missing = [key for key in self.state_keys if key not in state]
        unexpected = [key for key in state if key not in tensors]
        if missing or unexpected:
            raise ConfigError(f"{where}: not this network's state dict (missing {missing[:3]}, "
                              f"unexpected {unexpected[:3]})")
        for key in self.state_keys:
            if tuple(state[key].shape) != tuple(tensors[key].shape[1:]):
                raise ConfigError(f"{where}: {key} has shape {tuple(state[key].shape)}, this network "
                                  f"needs {tuple(tensors[key].shape[1:])}")
            tensors[key][seed_index].copy_(state[key])

    @torch.no_grad()
    def seed_model(self, seed_index: int) -> nn.Module:
        """Seed ``seed_index``'s network as a plain module (every parameter and buffer, also those
        a state dict leaves out), in the mode and on the device of this module."""
        model = copy.deepcopy(self.template)
        tensors = {**self.params(), **self.buffers_by_name()}
        for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
            tensor.copy_(tensors[name][seed_index])
        return model


def seed_optimizer_state(stacked: torch.optim.Optimizer, seed_index: int) -> Dict:
    """Seed ``seed_index``'s part of the state dict of an optimiser over :class:`StackedSeeds`'
    parameters: what one optimiser over one network's parameters holds (its per-parameter
    tensors, e.g. Adam's moments, sliced; shared scalars such as Adam's ``step`` as they are)."""
    state = stacked.state_dict()
    shapes = _param_shapes(stacked)
    return {"state": {index: {key: _slice(value, shapes[index], seed_index) for key, value in entry.items()}
                      for index, entry in state["state"].items()},
            "param_groups": copy.deepcopy(state["param_groups"])}


def stack_optimizer_states(stacked: torch.optim.Optimizer, states: Sequence[Dict], where: Sequence[str]) -> Dict:
    """The state dict for an optimiser over :class:`StackedSeeds`' parameters from the seeds'
    separate state dicts (saved by separate or batched runs alike). Scalars they share (Adam's
    ``step``) must agree: the seeds of one batch are at the same epoch."""
    shapes = _param_shapes(stacked)
    merged = {}
    for index in states[0]["state"]:
        entries = [state["state"].get(index) for state in states]
        if any(entry is None for entry in entries):
            raise ConfigError(f"{where[entries.index(None)]}: its optimiser state lacks parameter {index}; "
                              f"it cannot be batched with {where[0]}")
        merged[index] = {key: _stack([entry[key] for entry in entries], shapes[index], key, where)
                         for key in entries[0]}
    return {"state": merged, "param_groups": copy.deepcopy(states[0]["param_groups"])}


def _param_shapes(optimizer: torch.optim.Optimizer) -> Dict[int, torch.Size]:
    params = [p for group in optimizer.param_groups for p in group["params"]]
    return {index: param.shape for index, param in enumerate(params)}


def _slice(value, stacked_shape: torch.Size, seed_index: int):
    if isinstance(value, torch.Tensor) and value.shape == stacked_shape:
        return value[seed_index].clone()
    return copy.deepcopy(value)


def _stack(values: List, stacked_shape: torch.Size, key: str, where: Sequence[str]):
    first = values[0]
    if isinstance(first, torch.Tensor) and tuple(first.shape) == tuple(stacked_shape[1:]):
        return torch.stack(values)
    for value, path in zip(values[1:], where[1:]):
        same = (torch.equal(torch.as_tensor(value), torch.as_tensor(first)) if isinstance(first, torch.Tensor)
                else value == first)
        if not same:
            raise ConfigError(f"{path}: optimiser state {key!r} is {value!r}, {where[0]} has {first!r}; "
                              f"seeds at different points cannot be batched")
    return copy.deepcopy(first)


class OneSeed:
    """A separate run's one network (wrapped in DDP under torchrun): what every checkpoint holds.
    Values per seed (losses, sums, orders) have no seed dimension (:attr:`shape` ``()``)."""

    shape: Tuple[int, ...] = ()

    def check(self, device: torch.device, distributed: bool, streamed: bool, approach: str) -> None:
        """One seed trains anywhere, with any loss, except under torchrun with a loss whose step keeps
        state of its own (VOS's queues and parameters, MixOE's draws), which DDP would not share."""
        if distributed and not batches_over_seeds(approach):
            raise ConfigError(f"approach {approach!r} cannot train under torchrun (DDP): its loss keeps state "
                              f"and parameters of its own per process, which DDP does not synchronise")

    def place(self, models: Sequence[nn.Module], world, device: torch.device,
              channels_last: bool) -> Tuple[nn.Module, nn.Module]:
        """``(model, network)``: the network on ``device``, and what trains it (DDP or itself)."""
        model = models[0].to(device)
        if channels_last:
            model.to(memory_format=torch.channels_last)
        return model, world.wrap(model, device)

    def map(self, function: Callable, network: nn.Module, x, y, weights, shared: bool = False):
        """``function(network, x, y, weights)``: the seed's own batch (``shared`` changes nothing)."""
        return function(network, x, y, weights)

    def stack(self, tensors: Sequence[torch.Tensor]) -> torch.Tensor:
        """The one seed's value of a list of one per seed."""
        return tensors[0]

    def state(self, model: nn.Module, optimizer: torch.optim.Optimizer, seed_index: int) -> Tuple[Dict, Dict]:
        return model.state_dict(), optimizer.state_dict()

    def load_states(self, model: nn.Module, optimizer: torch.optim.Optimizer, saved: Sequence[Dict],
                    where: Sequence[str]) -> None:
        model.load_state_dict(saved[0]["model"])
        optimizer.load_state_dict(saved[0]["optimizer"])

    def load_weights(self, model: nn.Module, seed_index: int, state: Dict) -> None:
        model.load_state_dict(state)

    def seed_model(self, model: nn.Module, seed_index: int) -> nn.Module:
        return model


class SeedBatch(OneSeed):
    """S seeds as one :class:`StackedSeeds` model (never DDP, never channels_last: stacked 5-D
    weights have no such layout). Values per seed carry a leading seed dimension (:attr:`shape`)."""

    def __init__(self, count: int):
        self.shape = (count,)

    def check(self, device: torch.device, distributed: bool, streamed: bool, approach: str) -> None:
        """Refuses DDP, streamed data (:func:`resolve_batched_seeds`) and a loss that cannot be batched
        over seeds (:func:`batches_over_seeds`), in one line, before anything is built."""
        resolve_batched_seeds(True, device, self.shape[0], distributed, streamed)
        if not batches_over_seeds(approach):
            raise ConfigError(f"approach {approach!r}: its loss keeps state or draws on the host in each step "
                              f"(batches_over_seeds = False), so its seeds cannot train as one model; "
                              f"train them separately (batched_seeds: false)")

    def place(self, models, world, device, channels_last):
        model = StackedSeeds(models)
        model.to(device)
        return model, model

    def map(self, function, network, x, y, weights, shared=False):
        """Every seed's result at once; ``x``, ``y`` and ``weights`` have a seed dimension, or with
        ``shared`` all seeds see the same ones (validation batches)."""
        dim = None if shared else 0
        return network.map(function, x, y, weights, in_dims=(dim, dim, None if weights is None else dim))

    def stack(self, tensors):
        return torch.stack(list(tensors))

    def state(self, model, optimizer, seed_index):
        return model.seed_state_dict(seed_index), seed_optimizer_state(optimizer, seed_index)

    def load_states(self, model, optimizer, saved, where):
        for i, (state, path) in enumerate(zip(saved, where)):
            model.load_seed_state_dict(i, state["model"], path)
        optimizer.load_state_dict(stack_optimizer_states(optimizer, [state["optimizer"] for state in saved], where))

    def load_weights(self, model, seed_index, state):
        model.load_seed_state_dict(seed_index, state)

    def seed_model(self, model, seed_index):
        return model.seed_model(seed_index)


def seed_layout(seeds: Optional[Sequence[int]]) -> OneSeed:
    """How the trainer holds the networks of ``seeds``: None is one separate run; a list (even of
    one) is those seeds stacked."""
    return OneSeed() if seeds is None else SeedBatch(len(seeds))
