"""The documentation's benchmark result pages are generated from the committed benchmark.json of
their runs (docs/result_pages.py, experiments.benchmark_report.site_page), never edited: each
published page is regenerated here and compared byte for byte (issue 55 item 7)."""
from __future__ import annotations

import json
import re
import sys

from agnostophobia.experiments.benchmark import summarise
from agnostophobia.experiments.benchmark_report import site_page
from repo_paths import REPO as ROOT, load_module


def _pages():
    return load_module("result_pages", ROOT / "docs/result_pages.py")


def _result():
    """A benchmark's result as benchmark.json holds it, from the benchmark tests' rows (near and far sets)."""
    sys.path.insert(0, str(ROOT / "tests/experiments"))
    try:
        import test_benchmark as rows_of
    finally:
        sys.path.pop(0)
    rows = [rows_of._with_far(row, [0.5, 0.52, 0.51]) for row in rows_of.rows()]
    result = summarise(rows, min_accuracy=0.985)
    result.update({"meta": {"budget": "converged", "seeds": 3, "device": "cpu"}, "tuning": "config", "notes": [],
                   "test_sets": {name: 1000 for name in rows[0]["test"]}, "fprs": [0.01, 0.1],
                   "oscr_figures": {"cifar10-dog-truck": "figures/benchmark_oscr_cifar10-dog-truck.png",
                                    "mnist-rgb": "figures/benchmark_oscr_mnist-rgb.png"}})
    return json.loads(json.dumps(result, default=float))  # as read back from the file


def test_every_published_page_is_what_its_json_generates():
    pages = _pages()
    for label in pages.published():
        entry = pages.PAGES[label]
        assert (ROOT / "docs" / entry.page).read_text(encoding="utf-8") == pages.generate(label), (
            f"{entry.page} differs from what {entry.results} generates: run `python docs/result_pages.py write`")


def test_a_published_run_regenerates_and_an_edited_page_is_caught(tmp_path, monkeypatch, capsys):
    pages = _pages()
    docs, run = tmp_path / "docs", tmp_path / "run"
    (docs / "guide").mkdir(parents=True)
    (run / "figures").mkdir(parents=True)
    result = _result()
    result["meta"]["command"] = "agnostophobia benchmark cifar10-split --out /tmp/somewhere/bench-cifar"
    (run / "benchmark.json").write_text(json.dumps(result))
    for path in result["oscr_figures"].values():
        (run / path).write_bytes(b"png")
    monkeypatch.setattr(pages, "DOCS", docs)
    assert pages.published() == []
    pages.publish(run, "bench-cifar-5")
    # the machine's folder is not committed: the repository names no path of the machine that ran it
    committed = json.loads((docs / pages.PAGES["bench-cifar-5"].results).read_text())
    assert committed["meta"]["command"] == "agnostophobia benchmark cifar10-split --out runs/bench-cifar"
    assert pages.published() == ["bench-cifar-5"] and pages.main(["check"]) == 0
    entry = pages.PAGES["bench-cifar-5"]
    page = docs / entry.page
    assert (docs / entry.figures / "benchmark_oscr_mnist-rgb.png").read_bytes() == b"png"
    up = "/".join([".."] * (len(entry.page.split("/")) - 1))  # from the page's folder to docs/
    assert f"]({up}/{entry.figures}/benchmark_oscr_cifar10-dog-truck.png)" in page.read_text()
    assert f"[`bench-cifar-5`]({up}/{pages.PROVENANCE_PAGE}#bench-cifar-5)" in page.read_text()
    page.write_text(page.read_text().replace("0.610 [", "0.620 [", 1))  # a number typed by hand
    assert pages.main(["check"]) == 1 and "differs" in capsys.readouterr().out
    assert pages.main(["write"]) == 0 and pages.main(["check"]) == 0


def test_the_page_opens_with_the_answer_and_collapses_the_full_tables():
    text = site_page(_result(), "Split benchmark", "`run`", "figures-of-the-run")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[:4] == ["## Each approach with its paper's detector", "## What the data says",
                            "## How to read the tables", "## The run"]
    assert text.index("![OSCR curves on cifar10-dog-truck](figures-of-the-run/benchmark_oscr_cifar10-dog-truck.png)") \
        < text.index("## What the data says")
    # every table in a sticky-first container, every container and dropdown closed
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("|") and not lines[index - 1].startswith("|"):
            assert lines[index - 1] == ":::{container} sticky-first"
    assert text.count(":::{container} sticky-first") == len(re.findall(r"^:::$", text, re.M))
    # the full OSCR table, one per test set (3), the tests and the ranking metric
    assert text.count("::::{dropdown}") == len(re.findall(r"^::::$", text, re.M)) == 1 + 3 + 1 + 1
    # and the numbers are those benchmark.md shows: the paper's rows table is the same lines
    from agnostophobia.experiments.benchmark_report import markdown

    result = _result()
    plain = markdown(result, "run")
    table = [line for line in plain.split("## Each approach with its paper's detector")[1].splitlines()
             if line.startswith("| entropic |")]
    assert table and all(line in text for line in table)
    assert "| mean far D_a OSCR |" in text


def test_a_benchmark_over_splits_publishes_its_summary_and_an_edited_page_is_caught(tmp_path, monkeypatch, capsys):
    from agnostophobia.experiments.benchmark_splits import SPLITS_JSON, summarise_splits

    sys.path.insert(0, str(ROOT / "tests/experiments"))
    try:
        import test_benchmark_splits as splits_of
    finally:
        sys.path.pop(0)
    pages = _pages()
    label = next(label for label, entry in pages.PAGES.items() if entry.over_splits)
    docs, run = tmp_path / "docs", tmp_path / "run"
    (docs / "guide").mkdir(parents=True)
    run.mkdir()
    summary = summarise_splits([(0, splits_of.result(0.0)), (3, splits_of.result(0.1))], extra_data=["entropic"])
    summary.update({"protocol": "osr-mnist", "outside_negatives": "EMNIST letters train"})
    (run / SPLITS_JSON).write_text(json.dumps(summary))
    monkeypatch.setattr(pages, "DOCS", docs)
    pages.publish(run, label)
    assert pages.published() == [label] and pages.main(["check"]) == 0
    page = docs / pages.PAGES[label].page
    text = page.read_text()
    assert text.startswith(f"# {pages.PAGES[label].title}\n") and f"#{label})" in text
    assert "| softmax | softmax | 0.8100 | 0.9100 | 0.8600 ± 0.0707 |" in text and "OSCR (= OpenAUC)" in text
    assert text.count(":::{container} sticky-first") == 2  # the knowns-only table and the extra-data one
    page.write_text(text.replace("0.8600", "0.8700", 1))  # a number typed by hand
    assert pages.main(["check"]) == 1 and "differs" in capsys.readouterr().out
