"""The network's training forward (and so its backward) compiled by ``torch.compile`` (config key
``compile``), with a clean fallback to eager execution.

Why: on a CPU most of a small network's step outside its convolutions is element-wise work --
PReLU's or GELU's forward and backward, BatchNorm, the casts bf16 autocast inserts -- each a pass
over memory in eager PyTorch. Inductor fuses them into a few C++ loops (PyTorch's
``torch.compile`` tutorial, "inductor" backend). Measured on this project's 2-core Zen 4 machine
(``benchmarks/bench_training_speed.py``; the figures are in ``docs/guide/scaling.md``) the gain
is small and not general: +3 % on the PReLU LeNet++ and +10 % on the width-16 ResNet-18 in bf16,
but -3 % on the activation-free LeNet++ and -9 % on the airbench network, whose oneDNN kernels
already fuse what inductor would. So no shipped config turns it on, and the default is ``false``.

Where it applies: one process, one seed, on a CPU (``compile: auto``) or wherever ``compile: true``
asks. ``auto`` leaves it off on a GPU (no GPU run has measured it yet) and where inductor finds no
C++ compiler. A compile that fails (no compiler, an operator inductor cannot lower) is reported in
one line and the run trains eagerly: the numbers differ from an eager run's only by floating-point
rounding, so ``compile`` is free to change when a run resumes.
"""
from __future__ import annotations

import functools
import logging
import shutil
import warnings

import torch
from torch import nn

from agnostophobia.errors import AgnostophobiaWarning

AUTO = "auto"


@functools.lru_cache(maxsize=None)
def cpp_compiler() -> str:
    """The C++ compiler inductor's CPU backend would call ('' where there is none)."""
    try:
        from torch._inductor import config as inductor_config
        configured = inductor_config.cpp.cxx
        names = [name for name in (configured if isinstance(configured, (tuple, list)) else (configured,)) if name]
    except Exception:  # a torch without inductor
        return ""
    for name in [*names, "g++", "clang++"]:
        found = shutil.which(name)
        if found:
            return found
    return ""


def resolve_compile(setting, device, stacked: bool = False, distributed: bool = False) -> tuple:
    """``(compile?, why)`` for the config key ``compile`` (auto, true or false) on ``device``."""
    if setting is False:
        return False, "off (config)"
    if stacked or distributed:
        return False, "off: stacked seeds and torchrun train eagerly"
    device_type = torch.device(device).type
    if setting == AUTO:
        if device_type != "cpu":
            return False, f"auto: off on {device_type} (not yet measured there)"
        if not cpp_compiler():
            return False, "auto: off, no C++ compiler for inductor found"
        return True, f"auto: on, inductor's CPU backend with {cpp_compiler()}"
    return True, "on (config)"


class CompiledOrEager(nn.Module):
    """``module`` called through ``torch.compile``; if the first compiled call fails, the module
    is called eagerly from then on (one warning names the cause). The parameters, buffers and
    state dict are ``module``'s own: checkpoints are those of an eager run."""

    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module
        # inductor's CPU build looks for a CUDA toolkit and logs a warning when a CPU-only machine
        # has none: noise for a user training on the CPU
        logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
        self._compiled = torch.compile(module)
        self._proven = False  # a compiled call has succeeded: errors from then on are real

    def forward(self, *args, **kwargs):
        if self._compiled is None:
            return self.module(*args, **kwargs)
        if self._proven:
            return self._compiled(*args, **kwargs)
        try:
            out = self._compiled(*args, **kwargs)
        except Exception as exc:  # compiling failed before anything ran: train eagerly
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            warnings.warn(f"compile: torch.compile failed ({type(exc).__name__}: {first}); training eagerly",
                          AgnostophobiaWarning, stacklevel=2)
            self._compiled = None
            return self.module(*args, **kwargs)
        self._proven = True
        return out
