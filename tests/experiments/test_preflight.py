"""A training command's refusals that need no library and no image come before torch is
imported (``experiments.preflight``): a missing experiment file, and a protocol from files whose
root or class folder is missing (with "did you mean")."""
from __future__ import annotations

import pytest
from imports import modules_imported
from reliability_table import proves

EXPERIMENT = """name: mine
protocol: {{type: {kind}, root: {root}, image_size: 32, channels: 3, known: [cat, dgo], unknown: [bird]}}
model: small-cnn
approaches: [softmax]
"""


@pytest.fixture
def images(tmp_path):
    for folder in ("cat", "dog", "bird", "train/cat", "train/dog", "test/bird"):
        (tmp_path / "imgs" / folder).mkdir(parents=True)
    return tmp_path / "imgs"


@proves("refused input", "train and reproduce refuse a missing experiment file, a protocol root that does not exist "
                         "(named as such) and a class-folder typo (with 'did you mean') in one line, before torch is "
                         "imported and before any image is read")
@pytest.mark.parametrize("command", ["train", "reproduce"])
@pytest.mark.parametrize("case, says", [("typo-imagefolder", "dgo: the class folder named in the config does not "
                                                             "exist (did you mean 'dog'?)"),
                                        ("typo-folders", "train/dgo: the class folder named in the config does not "
                                                         "exist (did you mean 'dog'?)"),
                                        ("no-root", "the protocol's root folder (protocol.root) does not exist"),
                                        ("no-file", "no such experiment file")])
def test_a_training_refusal_that_needs_no_image_comes_before_torch(images, tmp_path, command, case, says):
    config = tmp_path / "exp.yaml"
    if case != "no-file":
        kind = "folders" if case == "typo-folders" else "imagefolder"
        root = tmp_path / "missing" if case == "no-root" else images
        config.write_text(EXPERIMENT.format(kind=kind, root=root))
    code, imported, err = modules_imported([command, config, "--out", tmp_path / "out"])
    assert code == 1 and len(err) == 1 and says in err[0], err
    assert imported == [] and not (tmp_path / "out").exists()
