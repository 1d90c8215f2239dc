"""Baselines the paper compares against.

* :mod:`.ensemble`: the adversarially trained deep ensemble of MLPs of Lakshminarayanan
  et al. (NIPS 2017), paper Fig. 3b/3c (``agnostophobia reproduce ensemble``).

No public Python API: the command ``agnostophobia reproduce ensemble`` is the interface, and the
module's functions may change without notice (hence no API page).
"""

__all__: list = []
