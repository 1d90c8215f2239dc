"""Where a run computes, and the process-wide settings that go with the device.

* :func:`resolve_device`: the config's ``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``) as a
  :class:`torch.device`, or a one-line :class:`ConfigError`. A command resolves it once and
  passes the result down (``reproduce``, ``train``, ``tune``); the trainer resolves it only when
  called without one.
* :func:`use_deterministic_algorithms`: config key ``deterministic``.
* :func:`limit_cpu_threads`: config key ``cpu_threads``.
* :func:`channels_last_is_safe`: whether config key ``channels_last`` may train this network here.
* :func:`cpu_model`: the processor as the run records name it.
"""
from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Callable, List, Optional

import torch

from agnostophobia._validation import DEVICE_RULE
from agnostophobia.errors import ConfigError


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The processor as Linux names it, with its family and model numbers, which tell apart processors
    that one name covers (a virtual machine's "Intel(R) Xeon(R) Processor" spans generations):
    ``Intel(R) Xeon(R) Processor (family 6, model 167)``; where there is no ``cpuinfo``, Python's name
    for the machine (``x86_64``).

    Args:
        cpuinfo: the file to read (Linux's ``/proc/cpuinfo``).

    Returns:
        The processor's name.

    Examples:
        >>> from agnostophobia.training.device import cpu_model
        >>> isinstance(cpu_model(), str) and cpu_model() != ""
        True
    """
    try:
        lines = cpuinfo.read_text().splitlines()
    except OSError:
        return platform.processor() or platform.machine()
    fields = {}
    for line in lines:
        key, _, value = line.partition(":")
        if not key.strip() and fields:  # the first core's block ends at its blank line
            break
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or platform.machine()
    if "cpu family" in fields and "model" in fields:
        return f"{name} (family {fields['cpu family']}, model {fields['model']})"
    return name


def resolve_device(name) -> torch.device:
    """``name`` as a device that exists here; ``auto`` is CUDA where available, else the CPU.

    Args:
        name: a config's ``device`` value (``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``mps``) or a
            :class:`torch.device`.

    Returns:
        The :class:`torch.device`.

    Raises:
        ConfigError: a name that is no device, or a device this machine does not have (one line).

    Examples:
        >>> from agnostophobia.training import resolve_device
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise ConfigError(f"device {name!r}: not a device name ({DEVICE_RULE})") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r}: requested but CUDA is not available here")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise ConfigError(f"device {name!r}: requested but only {torch.cuda.device_count()} GPU(s) exist here")
    if device.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ConfigError(f"device {name!r}: requested but MPS (Apple GPU) is not available here")
    if device.type not in ("cpu", "cuda", "mps"):  # xpu, meta ...: refused before a run folder is made
        raise ConfigError(f"device {name!r}: not supported ({DEVICE_RULE})")
    return device


def use_deterministic_algorithms(device: torch.device) -> None:
    """Deterministic algorithms for bit-identical reruns and resumes on CUDA (``deterministic: true``).

    Process-wide and not undone after the run: ``torch.use_deterministic_algorithms``,
    cuDNN autotuning off, and on CUDA ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` unless the
    environment sets it already (cuBLAS needs it for deterministic matrix products).
    Operations without a deterministic implementation (e.g. the backward pass of
    ``AdaptiveAvgPool2d`` on CUDA) run anyway, and PyTorch warns naming them.
    """
    if device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)


def limit_cpu_threads(device: torch.device, threads: Optional[int]) -> Callable[[], None]:
    """Use ``threads`` intra-op threads on the CPU (None: PyTorch's default); returns the undo.

    Small matrix products (an MLP with batch 100) gain little from a second thread and, next to
    another busy process, two threads slowed training 160-fold on a 2-core machine.
    """
    if torch.device(device).type != "cpu" or threads is None:
        return lambda: None
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    return lambda: torch.set_num_threads(previous)


def unsafe_channels_last_convolutions(model: torch.nn.Module) -> List[str]:
    """The convolutions of ``model`` whose weight gradient oneDNN corrupts memory computing in
    channels_last on a CPU: 1x1 kernels with a stride above 1 and 2 to 7 input channels.

    Measured with torch 2.14.1 on an AVX2-only AMD EPYC (Zen 3): ``Conv2d(c, 2c, 1, stride=2)``
    in channels_last, c in 2..7, aborts with a corrupted heap or hangs within 20 backward passes
    (c = 1 and c >= 8 run clean; contiguous memory runs clean). A narrow ResNet's downsampling
    shortcut (width 2 or 4) is such a layer; the standard networks (width 16 and above) have none.
    """
    return [name for name, module in model.named_modules()
            if isinstance(module, torch.nn.Conv2d) and module.kernel_size == (1, 1)
            and max(module.stride) > 1 and 2 <= module.in_channels < 8]


def channels_last_is_safe(model: torch.nn.Module, device: torch.device) -> bool:
    """Whether ``model`` may train in channels_last on ``device``: everywhere except on a CPU
    when it has a layer :func:`unsafe_channels_last_convolutions` names. The rule does not depend
    on the processor, so a run trains in the same memory format on every CPU."""
    return torch.device(device).type != "cpu" or not unsafe_channels_last_convolutions(model)
