"""Issue 31, item 4: a set name maps to file names one to one (plotting.run.set_file_stems)."""
from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from agnostophobia.plotting.run import set_file_stems

NAMES = st.lists(st.text(alphabet="aAbB _-.!é/1", min_size=0, max_size=6), unique=True, max_size=12)


@given(NAMES)
def test_stems_are_one_to_one_safe_and_stable_as_sets_are_added(names):
    stems = set_file_stems(names)
    assert list(stems) == names
    assert len({s.casefold() for s in stems.values()}) == len(names)  # distinct also where case is not
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", s) and not s.startswith(".") for s in stems.values())
    for k in range(len(names)):  # a set added later never renames an earlier one's files
        assert set_file_stems(names[:k]) == {n: stems[n] for n in names[:k]}


def test_a_stem_keeps_the_name_and_a_collision_is_numbered():
    assert set_file_stems(["set one", "set_one", "set-one", "Set One"]) == {
        "set one": "set_one", "set_one": "set_one-2", "set-one": "set-one", "Set One": "Set_One-3"}
