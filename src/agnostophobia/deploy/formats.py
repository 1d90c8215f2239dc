"""The file formats ``export`` writes, declared once for :mod:`.export` and for the command
line, which lists them without importing torch.

First: ``pt2`` (:func:`torch.export.export`), the default: no package beyond torch, and no
deprecation. ``onnx`` needs the ``[onnx]`` extra. ``torchscript`` (:func:`torch.jit.trace`)
stays for existing users; PyTorch deprecates it in favour of ``torch.export``.
"""
FORMATS = ("pt2", "onnx", "torchscript")
DEFAULT_FORMAT = FORMATS[0]
