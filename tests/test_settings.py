"""The constructor made from the declarations (``agnostophobia.settings.DeclaresSettings``): a
setting written once, as a class attribute, is the constructor's keyword-only argument with its
default, checked against its declaration, kept, listed by ``settings()`` and shown by the repr."""
from __future__ import annotations

import inspect

import pytest
import torch

from agnostophobia.detectors import DETECTORS, Detector, build_detector
from agnostophobia.losses import LOSSES, ObjectosphereLoss, OpenSetLoss, build_loss
from agnostophobia.settings import Setting


def _keyword_only_settings(cls, skip=()):
    parameters = inspect.signature(cls).parameters
    return {name: p.default for name, p in parameters.items() if p.kind is p.KEYWORD_ONLY and name not in skip}


@pytest.mark.parametrize("name", LOSSES.names())
def test_a_loss_constructor_is_its_base_arguments_then_its_settings_keyword_only(name):
    cls = LOSSES.get(name)
    parameters = list(inspect.signature(cls).parameters.values())
    assert [p.name for p in parameters[:2]] == ["num_classes", "reduction"]
    assert parameters[1].default == "mean"
    assert _keyword_only_settings(cls) == {n: s.default for n, s in cls.SETTINGS.items()}


@pytest.mark.parametrize("name", DETECTORS.names())
def test_a_detector_constructor_takes_its_settings_keyword_only(name):
    cls = DETECTORS.get(name)
    parameters = inspect.signature(cls).parameters
    assert all(p.kind is p.KEYWORD_ONLY for p in parameters.values()), name
    assert _keyword_only_settings(cls) == {n: s.default for n, s in cls.SETTINGS.items()}
    detector = cls()
    assert detector.settings() == {n: s.default for n, s in cls.SETTINGS.items() if s.recorded}


def test_the_signature_is_what_help_shows():
    assert str(inspect.signature(ObjectosphereLoss)) == \
        "(num_classes: 'int', reduction: 'str' = 'mean', *, xi: float = 50.0, lambda_: float = 0.0001)"
    assert str(inspect.signature(DETECTORS.get("knn"))) == (
        "(*, k: int = 50, normalize: bool = True, class_conditional: bool = False, query_chunk: int = 1024, "
        "reference_chunk: int = 8192)")
    assert ObjectosphereLoss.__init__.__qualname__ == "ObjectosphereLoss.__init__"


def test_a_loss_takes_its_reduction_positionally_beside_its_settings():
    loss = ObjectosphereLoss(3, "sum", xi=10)
    assert (loss.reduction, loss.xi, loss.lambda_) == ("sum", 10.0, 1e-4)
    assert isinstance(loss.xi, float)  # an integer given for a float setting becomes a float
    assert repr(loss) == "ObjectosphereLoss(num_classes=3, reduction='sum', xi=10.0, lambda_=0.0001)"


def test_a_wrong_call_is_refused_as_python_refuses_it():
    knn = DETECTORS.get("knn")
    with pytest.raises(TypeError, match=r"KNNDetector.__init__\(\) got an unexpected keyword argument 'kk'"):
        knn(kk=3)
    with pytest.raises(TypeError, match=r"takes 1 positional argument"):
        knn(3)  # settings are keyword-only
    with pytest.raises(ValueError, match=r"^k must be an integer >= 1, got 0$"):
        knn(k=0)


class _Toy(Detector):
    """A detector declared the one way: two settings, one derived attribute."""

    depth = Setting(int, 2, low=1)
    mode = Setting(str, "a", choices=("a", "b"))

    def __post_init__(self):
        self.label = f"{self.mode}{self.depth}"


class _DeeperToy(_Toy):
    """A subclass that adds a setting and redeclares one (its own default)."""

    depth = Setting(int, 5, low=1)
    width = Setting(float, 0.5, low=0)


def test_declarations_are_collected_in_order_and_become_their_defaults():
    assert list(_Toy.SETTINGS) == ["depth", "mode"]
    assert _Toy.depth == 2 and _Toy.mode == "a"  # as a dataclass: the attribute is the default
    toy = _Toy(mode="b")
    assert (toy.depth, toy.mode, toy.label) == (2, "b", "b2")  # __post_init__ ran after the settings
    assert repr(toy) == "_Toy(depth=2, mode='b')"


def test_a_subclass_adds_and_redeclares_settings():
    assert list(_DeeperToy.SETTINGS) == ["depth", "mode", "width"]
    assert _keyword_only_settings(_DeeperToy) == {"depth": 5, "mode": "a", "width": 0.5}
    assert _DeeperToy().label == "a5"
    with pytest.raises(ValueError, match="width must be a number >= 0"):
        _DeeperToy(width=-1.0)


def test_a_setting_declared_twice_is_refused_where_the_class_is_defined():
    with pytest.raises(TypeError, match="'depth' is declared twice"):
        class Twice(Detector):  # noqa: F841
            SETTINGS = {"depth": Setting(int, 1)}
            depth = Setting(int, 1)


def test_a_hand_written_constructor_is_kept_and_checked():
    """A class that needs its own ``__init__`` keeps it; its defaults must still be the declarations'."""
    class Own(Detector):
        depth = Setting(int, 3, low=1)

        def __init__(self, depth: int = 3, scratch=None):
            self._take_settings(depth=depth)
            self.scratch = scratch

    assert Own(depth=4, scratch=1).depth == 4 and Own().scratch is None
    with pytest.raises(TypeError, match="keyword depth=4 differs from its declared default 3"):
        class Drifted(Detector):  # noqa: F841
            depth = Setting(int, 3, low=1)

            def __init__(self, depth: int = 4):
                self._take_settings(depth=depth)


def test_a_made_loss_constructor_runs_the_base_then_the_settings_then_post_init():
    class Pushed(OpenSetLoss):
        push = Setting(float, 1.0, low=0)

        def __post_init__(self):
            self.scale = torch.nn.Parameter(torch.ones(self.num_classes))  # needs nn.Module's init first

        def forward(self, logits, labels, sample_weight=None):
            logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
            return self._reduce(self.push * (logits * self.scale).sum(dim=1), labels, weight)

    loss = Pushed(4, push=2)
    assert loss.push == 2.0 and loss.scale.shape == (4,) and "scale" in dict(loss.named_parameters())
    assert Pushed.hyperparameters() == {"push": Pushed.SETTINGS["push"]}
    with pytest.raises(ValueError, match="num_classes must be a positive integer"):
        Pushed(0)


def test_built_by_name_with_the_declared_defaults():
    assert build_loss("vos", 3).candidates == 10000
    assert build_detector("openmax").distance == "eucos"
    with pytest.raises(ValueError, match=r"selected \(6\) must be <= candidates \(5\)"):
        build_loss("vos", 3, candidates=5, selected=6)


def test_a_made_constructor_keeps_every_kind_of_base_argument():
    """Whatever the hand-written base takes (positional-only, ``*args``, keyword-only, ``**kw``)
    is passed on to it unchanged; the settings come after its keyword-only arguments."""
    from agnostophobia.settings import DeclaresSettings

    class Base(DeclaresSettings):
        def __init__(self, a, /, b, *args, c=1, **kw):
            self.got = (a, b, args, c, kw)

    class Made(Base):
        d = Setting(int, 2)

    assert str(inspect.signature(Made)) == "(a, /, b, *args, c=1, d: int = 2, **kw)"
    made = Made(1, 2, 3, c=4, d=5, e=6)
    assert made.got == (1, 2, (3,), 4, {"e": 6}) and made.d == 5


def test_a_record_key_may_be_required_a_path_or_a_list_and_belong_to_some_types():
    """What a record's key declares beyond a constructor's setting (a ``protocol:`` mapping's keys)."""
    import dataclasses
    from pathlib import Path

    from agnostophobia.settings import field_settings, setting

    @dataclasses.dataclass
    class Record:
        where: Path = setting(Path, required=True)
        names: tuple = setting(list, (), items=(str,), rule=lambda v: None if v else "must list a name")
        size: int = setting(int, 8, low=8, refusal="must be at least 8 pixels")
        only: str = setting(str, types=("a",))

    assert [f.name for f in dataclasses.fields(Record) if f.default is dataclasses.MISSING] == ["where"]
    declared = field_settings(Record)
    assert declared["where"].required and declared["only"].types == ("a",) and declared["only"].default is None
    assert declared["where"].problem("x/y") is None
    assert declared["where"].problem("") == declared["where"].problem(3) == "must be a path"
    assert declared["names"].problem(["a"]) is None and declared["names"].problem([]) == "must list a name"
    assert declared["names"].problem(["a", 1]) == "must be a list, each item a string"
    assert declared["size"].problem(4) == declared["size"].problem("8") == "must be at least 8 pixels"


def test_a_list_or_path_default_declares_no_inferred_setting():
    """Inference stays with the five kinds an annotation names: a list default is no setting."""
    import inspect

    def f(a=[1], b=1.0):  # noqa: B006
        return a, b

    parameters = inspect.signature(f).parameters
    assert Setting.inferred(parameters["a"]) is None and Setting.inferred(parameters["b"]).type is float
