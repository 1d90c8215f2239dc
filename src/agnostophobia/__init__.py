"""agnostophobia: open-set recognition after Dhamija, Günther and Boult,
"Reducing Network Agnostophobia" (NeurIPS 2018).

Label rule everywhere: a label ``>= 0`` is a known class, a negative label means
"unknown" (a known-unknown sample of D_b' during training, an unknown at test time).
"""
__version__ = "0.1.0"
