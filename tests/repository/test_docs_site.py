"""The documentation site's setup (the build itself is `make docs`, run by CI after `make test`):
every page is in a toctree, the build treats warnings as errors and fetches nothing, the
README stays a short entry, and the citation names the paper's authors."""
from __future__ import annotations

import re
from pathlib import Path

import yaml
from repo_paths import REPO, load_module

ROOT = REPO
DOCS = ROOT / "docs"


def toctree_entries() -> set:
    index = (ROOT / "docs/index.md").read_text(encoding="utf-8")
    entries = set()
    for block in re.findall(r"```\{toctree\}\n(.*?)```", index, flags=re.DOTALL):
        entries |= {line.strip() for line in block.splitlines() if line.strip() and not line.startswith(":")}
    return entries


def is_orphan(page: Path) -> bool:
    """A page left out of the navigation on purpose says so in its front matter (``orphan: true``)."""
    text = page.read_text(encoding="utf-8")
    return text.startswith("---\n") and "\norphan: true\n" in text.split("\n---\n", 1)[0] + "\n"


def test_every_markdown_page_is_in_a_toctree():
    """Adding a page is a file in docs/ and one line in docs/index.md; an orphan fails `make docs` too.
    The one kind of page kept out of the navigation, an internal record (the GPU check's raw
    output), declares ``orphan: true`` and is linked from the development notes."""
    pages = {p.relative_to(DOCS).with_suffix("").as_posix(): p for p in DOCS.rglob("*.md")
             if not p.relative_to(DOCS).as_posix().startswith(("_build/", "gallery/")) and p != ROOT / "docs/index.md"}
    orphans = {name for name, page in pages.items() if is_orphan(page)}
    assert set(pages) - orphans - toctree_entries() == set()
    development = (ROOT / "docs/development.md").read_text(encoding="utf-8")
    assert [name for name in sorted(orphans) if f"]({name}.md)" not in development] == []


def test_the_internal_gpu_record_is_not_in_the_navigation():
    """The H100 check's raw logs are a record for developers, not a page of the user guide."""
    assert not any(entry.startswith("gpu-runs/") for entry in toctree_entries())
    assert is_orphan(DOCS / "gpu-runs" / "h100-2026-11-27" / "README.md")


def test_every_reference_page_is_in_a_toctree():
    pages = {p.relative_to(DOCS).with_suffix("").as_posix() for p in (DOCS / "reference").glob("*.*")}
    assert pages and pages - toctree_entries() == set()


def test_the_api_reference_covers_each_public_package():
    """Each package's page: its docstring, a table of its classes and functions (each with a page of
    its own) and its data (registries, constants)."""
    for name in ("losses", "detectors", "metrics", "models", "training", "data", "deploy", "plotting"):
        page = (DOCS / "reference" / f"{name}.rst").read_text(encoding="utf-8")
        assert f".. automodule:: agnostophobia.{name}\n   :no-members:\n" in page
        assert f".. api-summary:: agnostophobia.{name}\n" in page
        if name != "training":  # its public names are classes and functions only
            assert f".. constants:: agnostophobia.{name}\n" in page  # the data of __all__


def test_each_public_class_and_function_gets_a_page_with_its_examples():
    """scikit-learn's layout: one page per object, written from the templates, ending with the
    gallery's examples that use it; the module tables list the names of ``__all__``."""
    refs = _refs()
    for kind in ("class", "function", "exception"):
        template = (DOCS / "_templates" / "autosummary" / f"{kind}.rst").read_text(encoding="utf-8")
        assert ".. currentmodule:: {{ module }}" in template
        assert ".. minigallery:: {{ module }}.{{ objname }}" in template
    objects = refs.api_objects("agnostophobia.losses")
    assert "agnostophobia.losses.EntropicOpenSetLoss" in objects["Classes"]
    assert "agnostophobia.losses.build_loss" in objects["Functions"]
    assert "agnostophobia.detectors.NotFittedError" in refs.api_objects("agnostophobia.detectors")["Exceptions"]
    # a re-export has its page at home (detectors.Setting is settings.Setting); data is on the module page
    assert all("Setting" != name.rsplit(".", 1)[1] for kind in refs.api_objects("agnostophobia.detectors").values()
               for name in kind)
    assert "agnostophobia.losses.LOSSES" not in sum(objects.values(), [])
    assert set(refs.documented_modules(DOCS / "reference")) >= {
        "agnostophobia.losses", "agnostophobia.training", "agnostophobia.errors", "agnostophobia.settings"}


def test_each_subpackage_has_an_api_page_or_declares_no_public_names():
    """A package with ``__init__.py`` is public (an API page) or says it is not (``__all__ = []``)."""
    for init in sorted((ROOT / "src" / "agnostophobia").glob("*/__init__.py")):
        name = init.parent.name
        page = DOCS / "reference" / f"{name}.rst"
        if page.is_file():
            assert f".. automodule:: agnostophobia.{name}\n" in page.read_text(encoding="utf-8"), name
        else:
            declared = re.search(r"^__all__(: list)? = \[\]$", init.read_text(encoding="utf-8"), re.MULTILINE)
            assert declared, f"agnostophobia.{name} has no API page and does not declare __all__ = []"


def test_make_docs_treats_warnings_as_errors_and_fetches_nothing():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    rule = makefile.split("\ndocs:", 1)[1].split("\n\n", 1)[0]
    assert "sphinx" in rule and " -W " in rule and "--keep-going" in rule and " -n " in rule
    conf = (DOCS / "conf.py").read_text(encoding="utf-8")
    assert not re.search(r"https?://", conf.split('"""', 2)[2]), "a URL in conf.py: the build must not fetch"
    assert 'mathjax_path = "mathjax/' in conf
    assert "make docs" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_readme_is_a_short_entry_with_its_figure():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme)
    assert figures and all((ROOT / f).is_file() for f in figures)


def test_the_citation_cites_the_paper_and_the_software():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["type"] == "software" and citation["cff-version"] == "1.2.0"
    paper = citation["preferred-citation"]
    assert paper["title"] == "Reducing Network Agnostophobia" and paper["year"] == 2018
    assert [(a["given-names"], a["family-names"]) for a in paper["authors"]] == [
        ("Akshay Raj", "Dhamija"), ("Manuel", "Günther"), ("Terrance E.", "Boult")]
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE).group(1)
    assert str(citation["version"]) == version


METRICS = ["oscr", "ccr_at_fpr", "oscr_area", "class_ccr_at_fpr", "threshold_at_fpr", "rates_at_threshold",
           "auroc", "fpr_at_tpr", "precision_recall", "aupr_in", "aupr_out", "accuracy_vs_confidence",
           "precision_vs_confidence", "entropy_magnitude_stats"]
SOURCE = re.compile(r"Sec\. ?\d|Eq\. ?\d|et al\.|Table \d|Fig\. ?\d|\b(19|20)\d\d\b")


def test_every_loss_detector_and_metric_states_its_formula_and_source():
    """The API reference shows each as math with the paper section (or the publication) it follows."""
    import inspect

    import agnostophobia.metrics as metrics
    from agnostophobia.detectors import DETECTORS
    from agnostophobia.losses import LOSSES

    documented = ([LOSSES.get(n) for n in LOSSES.names()] + [DETECTORS.get(n) for n in DETECTORS.names()]
                  + [getattr(metrics, n) for n in METRICS])
    lacking = [obj.__qualname__ for obj in documented
               if not (re.search(r":math:|\.\. math::", inspect.getdoc(obj) or "") and SOURCE.search(inspect.getdoc(obj) or ""))]
    assert lacking == []


def test_no_docstring_holds_a_control_character():
    """A docstring that is not a raw string turns \\theta into a tab and \\frac into a form feed."""
    import ast

    found = []
    for path in sorted((ROOT / "src").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc and re.search(r"[\t\f\b\a\v]", doc):
                    found.append(f"{path.relative_to(ROOT)}: docstring of {getattr(node, 'name', 'the module')}")
    assert found == []


def _refs():
    return load_module("agnostophobia_refs", ROOT / "docs/_ext/agnostophobia_refs.py")


def test_the_settings_reference_lists_every_registered_loss_and_detector_with_its_declarations():
    from agnostophobia.detectors import DETECTORS
    from agnostophobia.losses import LOSSES

    refs = _refs()
    losses, detectors = "\n".join(refs.loss_settings_rst()), "\n".join(refs.detector_settings_rst())
    for name in LOSSES.names():
        assert f"``{name}``\n" in losses
    sections = dict(re.findall(r"``([\w+-]+)``\n~+\n(.*?)(?=\n``[\w+-]+``\n~|\Z)", detectors, flags=re.DOTALL))
    assert sorted(sections) == DETECTORS.names()
    for name, section in sections.items():
        for key, setting in DETECTORS.get(name).SETTINGS.items():
            row = section.split(f"   * - ``{key}``", 1)[1].split("   * - ", 1)[0]
            assert refs.describe_allowed(setting) in row and refs._default(setting.default) in row
    # Objectosphere's xi and lambda (Eq. 2), under the YAML spelling, with default and range
    assert "``lambda``" in losses and "``50.0``" in losses and "``[0, inf)``" in losses


def test_describe_allowed_reads_the_declaration():
    from agnostophobia.settings import Setting

    refs = _refs()
    assert refs.describe_allowed(Setting(float, 1.0, low=0, low_open=True)) == "``(0, inf)``"
    assert refs.describe_allowed(Setting(int, None, low=1, nullable=True)) == "``[1, inf)`` or ``null``"
    assert refs.describe_allowed(Setting(str, "a", choices=("a", "b"))) == "one of ``a``, ``b``"


def test_the_exportable_scores_list_is_generated_from_the_registry():
    """The deploying page's list of exportable scores comes from each detector's declaration: GEN,
    which exports, was missing from the hand-written list."""
    from agnostophobia.deploy.export import exportable
    from agnostophobia.detectors import DETECTORS

    text = "\n".join(_refs().exportable_scores_rst())
    exported, refused = text.split("- Refused", 1)
    assert "``gen``" in exported and "``openmax``" in refused and "``evm``" in refused
    for name in DETECTORS.names():
        assert f"``{name}``" in (exported if name in exportable() else refused), name
    assert "{exportable-scores}" in (ROOT / "docs/guide/deploying.md").read_text()


def _check_site():
    return load_module("check_site", ROOT / "docs/check_site.py")


def test_the_browser_check_finds_a_broken_page_an_anchor_and_a_mailto(tmp_path):
    """docs/check_site.py's link part (the rest needs Chromium and a built site: CI runs it after
    `make docs`) reads every href of the built pages."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "index.html").write_text('<a href="sub/page.html#here">ok</a> <a href="sub/page.html#gone">x</a>'
                                         '<a href="missing.html">x</a> <a href="mailto:CCR%40FPR">x</a>'
                                         '<a href="https://example.org/">external</a> <a href="#top">x</a><p id="top">')
    (tmp_path / "sub" / "page.html").write_text('<h1 id="here">t</h1><a href="../index.html">back</a>')
    check = _check_site()
    broken = check.broken_links(tmp_path, check.pages(tmp_path))
    assert len(broken) == 3
    assert any("#gone" in b for b in broken) and any("missing.html" in b for b in broken)
    assert any("mailto" in b for b in broken)


def test_ci_checks_the_site_in_a_browser_after_building_it():
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "chromium-driver" in run and run.index("make docs") < run.index("docs/check_site.py")


def test_the_site_check_finds_internal_navigation_a_missing_paper_link_and_thin_api_entries(tmp_path):
    """docs/check_site.py's checks read from the files (issue 57 item 9): each finds what it is
    for on a page written here, and nothing on a page without it."""
    check = _check_site()
    nav = ('<div class="sidebar-tree"><a href="guide/benchmark.html">b</a>'
           '<a href="gpu-runs/h100/README.html">record</a></div><main>{}</main>')
    (tmp_path / "index.html").write_text(nav.format(""))
    assert check.internal_in_navigation(tmp_path) == ["index.html navigation: gpu-runs/h100/README.html"]
    assert check.paper_link_missing(tmp_path) == [f"index.html: no link to {check.PAPER_URL}"]
    (tmp_path / "index.html").write_text(nav.replace('<a href="gpu-runs/h100/README.html">record</a>', "")
                                         .format(f'<a href="{check.PAPER_URL}">paper</a>'))
    assert check.internal_in_navigation(tmp_path) == [] and check.paper_link_missing(tmp_path) == []

    (tmp_path / "reference").mkdir()
    entry = ('<dl class="py {kind}"><dt class="sig sig-object py" id="pkg.{name}">{name}</dt><dd>'
             '<dl class="field-list simple"><dt class="field-odd">Parameters<span class="colon">:</span></dt>'
             '<dd class="field-odd"><ul class="simple"><li><p><strong>x</strong> (<em>int</em>) -- a count.</p></li>'
             '{extra}</ul></dd></dl>{body}</dd></dl>')
    method = entry.format(kind="method", name="Thing.run", extra="", body='<p class="rubric">Examples</p>')
    page = "".join([entry.format(kind="function", name="good", extra="", body='<p class="rubric">Examples</p>'),
                    entry.format(kind="function", name="bare", extra="<li><p><strong>y</strong> (<em>float</em>)"
                                 "</p></li>", body=""),
                    entry.format(kind="class", name="Thing", extra="", body=method),  # a method's example: not its
                    entry.format(kind="exception", name="Oops", extra="", body="")])
    (tmp_path / "reference" / "api.html").write_text(page)
    assert check.api_without_examples(tmp_path) == ["pkg.Thing", "pkg.bare"]
    assert check.api_without_examples(tmp_path, ("pkg.bare",)) == ["pkg.Thing"]
    assert check.parameters_without_description(tmp_path) == ["pkg.bare: y (float)"]
    from tests.repository.test_docs_returns import NOT_YET

    assert check.listed_example_gaps() == NOT_YET["examples"]  # read from the source test, not repeated
