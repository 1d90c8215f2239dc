"""Where the tests find the repository's files: one declaration, so that a test file can move to
another folder of tests/ without counting ``parents[...]`` again."""
from pathlib import Path

#: This folder: the tests' shared helpers (on the tests' path through pytest's ``pythonpath``).
SUPPORT = Path(__file__).resolve().parent
#: The tests and the committed files they read (a run of an old commit, reference numbers).
TESTS = SUPPORT.parent
FIXTURES = TESTS / "fixtures"
#: The repository's root: docs/, examples/, src/, pyproject.toml.
REPO = TESTS.parent


def load_module(name: str, path: Path):
    """The module in the file ``path`` (a script of docs/ or a fixture's maker, not on the path), loaded as ``name``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
