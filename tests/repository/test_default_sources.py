"""Where each default comes from (docs/training-peers.md) is declared beside it: every setting of
every loss of the package says where its default was read (``Setting.source``) and what differs
here (``Setting.differs``), and so do the facts that are no setting (a fine-tune's ``FineTune``,
a from-scratch ``scratch_recipe``, a loss's other ``provenance``). The page's table is generated
from these declarations and from the shipped configs (docs/_ext, ``.. default-sources::``)."""
from __future__ import annotations

import dataclasses

import pytest
from docutils import nodes
from docutils.core import publish_doctree

from agnostophobia.losses import LOSSES
from agnostophobia.training.config import TrainConfig, load_experiment
from tests.repository.test_docs_site import ROOT, _refs

#: The losses the package registers (a plugin's or a test's own loss need not say where its
#: defaults come from; the table shows "not stated" for it).
PACKAGE_LOSSES = [name for name in LOSSES.registered() if LOSSES.get(name).__module__.startswith("agnostophobia.")]


@pytest.mark.parametrize("approach", PACKAGE_LOSSES)
def test_every_default_of_every_loss_says_where_it_comes_from(approach):
    """A loss added without sources fails here: each setting, its recipe where it declares one,
    and its other facts name where they were read; a loss without settings names at least where
    the loss itself comes from."""
    cls = LOSSES.get(approach)
    facts = [cls.fine_tune or cls.scratch_recipe, *cls.provenance]
    for name, setting in cls.hyperparameters().items():
        assert setting.source.strip(), f"{approach}: setting {name!r} does not say where its default comes from"
    for fact in filter(None, facts):
        assert fact.source.strip(), f"{approach}: {fact!r} has no source"
    assert cls.hyperparameters() or any(facts), f"{approach} has no setting and declares no provenance"


def _rows(trains=None):
    return _refs().default_source_rows(trains)


def test_the_table_has_one_row_per_approach_and_setting_read_from_the_declarations():
    refs = _refs()
    rows = refs.default_source_rows()
    pairs = [(approach, row.what) for row in rows for approach in row.approaches]
    assert len(pairs) == len(set(pairs)), "an (approach, setting) pair in two rows"
    by_pair = {(approach, row.what): row for row in rows for approach in row.approaches}
    spelled = refs.yaml_names()
    expected = set()
    for approach in LOSSES.registered():
        for name, setting in LOSSES.get(approach).hyperparameters().items():
            row = by_pair[(approach, f"``{spelled.get(name, name)}``")]
            expected.add((approach, row.what))
            assert (row.source, row.differs) == (setting.source, setting.differs), (approach, name)
            assert row.ours.startswith(refs._default(setting.default)), (approach, name)
    assert {pair for pair in pairs if pair[1].startswith("``")} == expected
    # a fine-tune shares its plain approach's declarations, so their rows are one
    shared = [row for row in rows if row.what.startswith("``") and len(row.approaches) > 1]
    assert shared and all(f"{row.approaches[0]}-ft" in row.approaches for row in shared)


def test_each_recipe_row_is_its_declaration():
    rows = _rows()
    for approach in LOSSES.registered():
        cls = LOSSES.get(approach)
        recipe = cls.fine_tune or cls.scratch_recipe
        if recipe is None:
            continue
        (row,) = [r for r in rows if approach in r.approaches and r.what == "*recipe*"]
        declared = recipe.departures() if cls.fine_tune is not None else recipe.differs
        assert row.source == recipe.source and row.differs.startswith(declared), approach
        if cls.fine_tune is not None:
            assert f"``{recipe.start}``" in row.ours and f"{recipe.epochs} epochs" in row.ours, approach


def test_the_configs_values_stand_beside_the_declared_defaults():
    """A shipped config's ``loss:`` value and a budget's ``fine_tune_epochs`` are read from the
    config, never restated: a made-up config shows its own values."""
    approach, name, setting = next((a, n, s) for a in LOSSES.registered()
                                   for n, s in LOSSES.get(a).hyperparameters().items() if s.type is float)
    top = dataclasses.replace(TrainConfig(), loss={name: setting.default + 1.5})
    short = dataclasses.replace(top, fine_tune_epochs=3)
    trains = [("``made.yaml``", top, top), ("``made.yaml``, budget ``short``", top, short)]
    rows = _rows(trains)
    (row,) = [r for r in rows if approach in r.approaches and r.what.strip("`") in (name, _refs().yaml_names().get(name))]
    assert row.ours == f"``{setting.default}`` (declared); ``made.yaml``: ``{setting.default + 1.5}``"
    fine_tunes = [r for r in rows if r.what == "*recipe*" and LOSSES.get(r.approaches[0]).fine_tune is not None]
    assert fine_tunes
    for r in fine_tunes:
        recipe = LOSSES.get(r.approaches[0]).fine_tune
        assert r.differs.endswith(f"``made.yaml``, budget ``short``: ``3`` epochs (``fine_tune_epochs``), "
                                  f"not the recipe's {recipe.epochs}")
    assert all("made.yaml" not in r.differs for r in rows if r.what == "*recipe*" and r not in fine_tunes)


def test_the_peers_page_shows_each_fine_tunes_glyph_recipe_and_the_budgets_that_shorten_it():
    """Each fine-tune's recipe for glyphs (Outlier Exposure's MNIST recipe; the energy loss and MixOE at their
    authors' own lr, as they diverge at OE's) has its own row, which says why where it departs; the LeNet++
    ``smoke`` budget shortens the fine-tunes and its rows say so, with the number the config holds,
    and the ``converged`` budget trains the authors' epochs (no row names it)."""
    lenet = load_experiment("lenet++")
    assert lenet.for_budget("converged").train.fine_tune_epochs is None
    epochs = lenet.for_budget("smoke").train.fine_tune_epochs
    text = "\n".join(_refs().default_sources_rst(_rows()))
    assert f"``lenet++.yaml``, budget ``smoke``: ``{epochs}`` epochs" in text
    glyph_rows = [r for r in _rows() if r.what == "*recipe (glyphs)*"]
    assert sorted(a for r in glyph_rows for a in r.approaches) == ["energy-regularized-ft", "mixoe-ft",
                                                                    "outlier-exposure-ft"]
    assert all("MNIST/oe_tune.py" in r.source for r in glyph_rows)
    lr = {a: r.ours.split(" at ")[1].split(",")[0] for r in glyph_rows for a in r.approaches}
    assert lr == {"outlier-exposure-ft": "lr 0.01", "energy-regularized-ft": "lr 0.001", "mixoe-ft": "lr 0.001"}
    assert all("own fine-tune lr 10⁻³" in r.differs and "NaN" in r.differs
               for r in glyph_rows if r.approaches[0] != "outlier-exposure-ft")


def test_the_generated_table_is_valid_rst_and_replaces_the_hand_table():
    rows = _rows()
    tree = publish_doctree("\n".join(_refs().default_sources_rst(rows)),
                           settings_overrides={"report_level": 2, "halt_level": 2})  # a warning raises
    table_rows = list(tree.findall(nodes.row))
    assert len(table_rows) == len(rows) + 1 and {len(row.children) for row in table_rows} == {5}
    page = (ROOT / "docs/training-peers.md").read_text(encoding="utf-8")
    assert "```{eval-rst}\n.. default-sources::\n```" in page
    assert "| approach | setting | our default |" not in page
