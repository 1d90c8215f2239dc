"""docs/reliability.md's table is the list of tests that prove its promises (tests/_support/reliability_table.py):
a promise added, changed or removed in a test and not on the page, or on the page without its test,
fails here. Nothing is run but the reading of the test files' source."""
from __future__ import annotations

import reliability_table as rt


def test_the_pages_table_is_generated_from_the_tests():
    page = rt.PAGE.read_text()
    assert rt.page_table(page) == rt.table(), "run `python tests/_support/reliability_table.py --write`"


def test_every_threat_has_a_proof_and_every_proof_names_a_test_function():
    found = rt.proofs()
    assert {threat for threat, _, _ in found} == set(rt.THREATS)
    for _, claim, test in found:
        module, name = test.split("::")
        assert name.startswith("test_") and (rt.TESTS / module).is_file() and claim.strip() == claim


def test_the_page_is_titled_for_users():
    title = rt.PAGE.read_text().splitlines()[0].lower()
    assert title.startswith("# ") and not any(word in title for word in ("issue", "round"))


def test_an_unknown_threat_is_refused():
    import pytest

    with pytest.raises(ValueError, match="threat 'fire'"):
        rt.proves("fire", "nothing")
