r"""Synthetic 28x28 glyph images in class folders: a dataset generator for examples and first tries.

Like scikit-learn's ``make_*`` generators, these write a small, fully reproducible open-set
problem without any download: bars and boxes to be the known classes, diagonals or speckle
as negatives (trained on as "unknown", the paper's :math:`\mathcal{D}_b'`, Sec. 3) and a dot
grid or a cross as unknowns never seen in training (:math:`\mathcal{D}_a`). The folder tree
``ROOT/<split>/<class>/NNN.png`` is what a ``type: folders`` protocol reads (see the own-images
guide), so a user can try train, calibrate, predict and export before pointing at their own
images. They are not a benchmark: the glyphs are easy on purpose.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from agnostophobia.errors import AgnostophobiaError

#: The glyphs :func:`draw_glyph` can draw, with what each looks like.
GLYPH_SHAPES = {
    "hbar": "a horizontal bar",
    "vbar": "a vertical bar",
    "box": "a hollow square",
    "diag": "a diagonal line from top left to bottom right",
    "antidiag": "a diagonal line from top right to bottom left",
    "cross": "both diagonals",
    "speckle": "scattered single pixels",
    "dots": "a regular grid of dots",
}
#: The splits of a folder protocol, in the order they are written.
SPLITS = ("train", "val", "test")
SIZE = 28


def draw_glyph(shape: str, rng: np.random.Generator) -> np.ndarray:
    """One glyph: a ``(28, 28)`` uint8 image, white on black, its place jittered, with noise.

    Parameters
    ----------
    shape : str
        A name of :data:`GLYPH_SHAPES`.
    rng : numpy.random.Generator
        The source of the jitter and the noise; the same generator state draws the same image.

    Returns
    -------
    numpy.ndarray
        Shape ``(28, 28)``, dtype uint8; the glyph's pixels near 255, the background below 40.

    Raises
    ------
    AgnostophobiaError
        ``shape`` is not a name of :data:`GLYPH_SHAPES`.

    Examples
    --------
    >>> import numpy as np
    >>> from agnostophobia.data import draw_glyph
    >>> image = draw_glyph("box", np.random.default_rng(0))
    >>> image.shape, image.dtype, int(image.max()) > 200, int(image[0, 0]) < 50  # white on black
    ((28, 28), dtype('uint8'), True, True)
    """
    _check_shapes([shape], "shape")
    image = np.zeros((SIZE, SIZE), np.uint8)
    start, stop = rng.integers(5, 9), rng.integers(19, 23)
    if shape == "hbar":
        image[12 + rng.integers(-3, 4):16 + rng.integers(-3, 4), start:stop] = 255
    elif shape == "vbar":
        image[start:stop, 12 + rng.integers(-3, 4):16 + rng.integers(-3, 4)] = 255
    elif shape == "box":
        image[start:stop, start:stop] = 255
        image[start + 3:stop - 3, start + 3:stop - 3] = 0
    elif shape in ("diag", "antidiag", "cross"):
        for i in range(start, stop):
            if shape != "antidiag":
                image[i, max(i - 2, 0):i + 2] = 255
            if shape != "diag":
                image[i, max(SIZE - 1 - i - 2, 0):SIZE - 1 - i + 2] = 255
    elif shape == "speckle":
        image[rng.random((SIZE, SIZE)) < 0.08] = 255
    else:  # dots
        image[rng.integers(0, 2)::4, rng.integers(0, 2)::4] = 255
    noise = rng.integers(0, 40, image.shape)
    return np.clip(image.astype(int) + noise, 0, 255).astype(np.uint8)


def make_glyph_folders(root, known=("hbar", "vbar", "box"), negative=("diag",), unknown=("dots",),
                       per_split=None, seed: int = 0) -> dict:
    """Write a folder protocol of glyphs, ``root/<split>/<class>/NNN.png``, and return its layout.

    Known and negative classes get images in every split; unknown classes only in ``test``
    (they are never trained on, Sec. 3). The images of one ``seed`` are the same on every
    machine.

    Parameters
    ----------
    root : str or os.PathLike
        The folder to write into. It must not exist or be empty: nothing of the user's is
        overwritten or mixed in.
    known, negative, unknown : sequence of str
        The class folders of each role, names of :data:`GLYPH_SHAPES`; a name in at most one
        role. ``known`` needs two classes at least; ``negative`` and ``unknown`` may be empty.
    per_split : dict, optional
        Images per class in each split, ``{"train": 40, "val": 10, "test": 20}`` by default;
        a split left out gets none.
    seed : int
        Seeds :func:`numpy.random.default_rng`.

    Returns
    -------
    dict
        The ``protocol`` mapping of an experiment config for these folders
        (``type: folders``, ``root``, the three class lists, ``image_size: 28``,
        ``channels: 1``, ``kind: glyph``), ready for ``yaml.safe_dump``.

    Raises
    ------
    AgnostophobiaError
        An unknown shape, a class in two roles, fewer than two known classes, a bad count
        or split name, or a ``root`` that is a file or a non-empty folder.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from agnostophobia.data import make_glyph_folders
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     layout = make_glyph_folders(Path(folder) / "glyphs", per_split={"train": 2, "test": 1})
    ...     sorted(path.name for path in (Path(folder) / "glyphs").iterdir())
    ...
    ['test', 'train', 'val']
    >>> layout["known"], layout["negative"], layout["unknown"]
    (['hbar', 'vbar', 'box'], ['diag'], ['dots'])
    """
    for role, shapes in (("known", known), ("negative", negative), ("unknown", unknown)):
        if isinstance(shapes, str):
            raise AgnostophobiaError(f"{role}: give a list of glyph names, not the string {shapes!r}")
    known, negative, unknown = list(known), list(negative), list(unknown)
    per_split = dict(per_split if per_split is not None else {"train": 40, "val": 10, "test": 20})
    _check_layout(known, negative, unknown, per_split)
    root = Path(root)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise AgnostophobiaError(f"make_glyph_folders: root {str(root)!r} exists and is not an empty "
                                 "folder; choose a new folder")
    rng = np.random.default_rng(seed)
    from PIL import Image  # a dependency of torchvision; imported where images are written

    for split in SPLITS:
        classes = known + negative + (unknown if split == "test" else [])
        for shape in classes:
            folder = root / split / shape
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(per_split.get(split, 0)):
                Image.fromarray(draw_glyph(shape, rng)).save(folder / f"{i:03d}.png")
    return {"type": "folders", "root": str(root), "known": known, "negative": negative, "unknown": unknown,
            "image_size": SIZE, "channels": 1, "kind": "glyph"}


def _check_shapes(shapes, what: str) -> None:
    bad = [s for s in shapes if s not in GLYPH_SHAPES]
    if bad:
        raise AgnostophobiaError(f"{what}: {', '.join(map(repr, bad))} is not a glyph; choose from "
                                 f"{', '.join(GLYPH_SHAPES)}")


def _check_layout(known, negative, unknown, per_split) -> None:
    for role, shapes in (("known", known), ("negative", negative), ("unknown", unknown)):
        _check_shapes(shapes, role)
    everything = known + negative + unknown
    twice = sorted({s for s in everything if everything.count(s) > 1})
    if twice:
        raise AgnostophobiaError(f"a class has one role: {', '.join(twice)} is listed twice among "
                                 "known, negative and unknown")
    if len(known) < 2:
        raise AgnostophobiaError(f"known: an open-set problem needs two known classes at least, got {known}")
    for split, count in per_split.items():
        if split not in SPLITS:
            raise AgnostophobiaError(f"per_split: {split!r} is not a split; use {', '.join(SPLITS)}")
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
            raise AgnostophobiaError(f"per_split[{split!r}]: images per class must be a whole number >= 0, "
                                     f"got {count!r}")
