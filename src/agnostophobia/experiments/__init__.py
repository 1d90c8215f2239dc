"""Experiments: training runs, the paper reproductions and their reports.

No public Python API: the commands (``agnostophobia train``, ``reproduce``, ``evaluate``,
``benchmark``, ``tune``, ...; see the command reference) are the interface, and these modules
may change without notice (hence no API page). The library's parts for your own code are
``losses``, ``detectors``, ``metrics``, ``models``, ``data``, ``deploy`` and ``plotting``.
"""

__all__: list = []
