"""The folders a protocol from files names (``roots``): a missing root is one problem named as
such, a missing class folder gets the closest names present."""
from __future__ import annotations

from agnostophobia.data.file_protocols import list_protocol
from agnostophobia.data.file_protocols.roots import did_you_mean, folder_problems
from agnostophobia.data.file_protocols.spec import parse_file_protocol


def spec(root, kind="imagefolder", known=("cat", "dog"), unknown=("bird",)):
    return parse_file_protocol({"type": kind, "root": str(root), "image_size": 32, "channels": 3,
                                "known": list(known), "unknown": list(unknown)})


def test_a_missing_root_is_one_problem_named_as_the_root(tmp_path):
    for kind in ("imagefolder", "folders"):
        missing = spec(tmp_path / "nowhere", kind, known=[f"c{i}" for i in range(12)])
        assert folder_problems(missing) == [f"{tmp_path / 'nowhere'}: the protocol's root folder (protocol.root) "
                                            f"does not exist"]
        assert list_protocol(missing).problems == folder_problems(missing)  # not twelve missing class folders


def test_a_class_name_typo_gets_the_closest_folder_names(tmp_path):
    for name in ("cat", "dog", "bird", "fish"):
        (tmp_path / name).mkdir()
    problems = folder_problems(spec(tmp_path, known=("cat", "dgo")))
    assert problems == [f"{tmp_path / 'dgo'}: the class folder named in the config does not exist "
                        f"(did you mean 'dog'?)"]
    assert did_you_mean("zebra", tmp_path) == ""
    assert folder_problems(spec(tmp_path)) == []
