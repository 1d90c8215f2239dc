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


def _generated_with(pages, label, **fields):
    """Run ``label``'s page generated with those fields of its entry replaced (restored after)."""
    entry = pages.PAGES[label]
    pages.PAGES[label] = entry._replace(**fields)
    try:
        return pages.generate(label)
    finally:
        pages.PAGES[label] = entry


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


def _disagreements(result: dict) -> list:
    """What in a published ``benchmark.json`` its own per-seed numbers do not give again: each test's
    difference, Holm's p and decision (from the rows' per-seed values and the stored test samples'
    standard error), the ranking metric, every rank, and the sentences of "What the data says"."""
    from agnostophobia.experiments.benchmark_comparisons import ALPHA, MARGIN, tested_per_seed
    from agnostophobia.experiments.benchmark_ranking import rank_rows, ranking_metric
    from agnostophobia.experiments.benchmark_summary import what_the_data_says
    from agnostophobia.metrics import decide, paired_difference

    found = []
    rows = {r["row"]: r for r in result["rows"]}
    for family, tests in result["tests"].items():
        per_seed = tested_per_seed(family)
        differences = [paired_difference(rows[t["row"]][per_seed], rows[t["against"]][per_seed],
                                         sample_se=t["se_samples"]) for t in tests]
        for test, difference, decision in zip(tests, differences, decide(differences, MARGIN, ALPHA)):
            if (abs(difference.difference - test["difference"]) > 1e-12 or decision.verdict != test["decision"]
                    or abs(decision.p_holm - test["p_holm"]) > 1e-9):
                found.append(f"{family}: {test['row']} against {test['against']}")
    unranked = [{**r, "rank": None} for r in result["rows"]]
    declared = result["ranking"]["chosen"] if result["ranking"].get("declared") else None
    chosen = ranking_metric(unranked, declared=declared)["chosen"]
    if chosen != result["ranking"]["chosen"]:
        found.append(f"ranking metric {chosen}, stored {result['ranking']['chosen']}")
    ranks = {r["row"]: r["rank"] for r in rank_rows(unranked, result["ranking"]["chosen"])}
    found += [f"rank of {name}" for name, row in rows.items() if ranks[name] != row["rank"]]
    if what_the_data_says(result) != result["summary"]:
        found.append("what the data says")
    return found


def _published_runs(pages):
    """Each published run of one benchmark (not a summary over splits): its label, entry and result."""
    for label in pages.published():
        entry = pages.PAGES[label]
        if not entry.over_splits:
            yield label, entry, json.loads((ROOT / "docs" / entry.results).read_text(encoding="utf-8"))


def test_every_published_decision_rank_and_sentence_follows_from_its_per_seed_numbers():
    """Review of 2026-12-02: a page regenerates from its JSON byte for byte, but a decision, rank or
    sentence edited in the JSON would regenerate an identical page. Each published run's derived
    fields are computed again from its per-seed numbers; a JSON with one decision changed is caught."""
    pages = _pages()
    checked = 0
    for label, entry, result in _published_runs(pages):
        assert _disagreements(result) == [], f"{entry.results}: stored fields its numbers do not give"
        tampered = json.loads(json.dumps(result))
        test = next((t for tests in tampered["tests"].values() for t in tests), None)
        if test is None:  # nothing decided (one approach, or none converged): its rows were checked above
            assert not any(r["converged"] is not False for r in result["rows"] if r["approach"] != result["reference"]) \
                or len(result["accuracy"]) == 1, f"{entry.results}: converged approaches and no test"
            continue
        test["decision"] = "better" if test["decision"] != "better" else "worse"
        assert _disagreements(tampered), f"{entry.results}: a changed decision went unnoticed"
        checked += 1
    with_tests = [label for label in pages.published() if not pages.PAGES[label].over_splits
                  and any(json.loads((ROOT / "docs" / pages.PAGES[label].results).read_text(encoding="utf-8"))["tests"].values())]
    assert checked == len(with_tests) > 10


def test_a_superseded_page_says_which_run_asked_its_questions_again():
    """A run whose questions a later run asked again under the conditions the others share keeps its
    page, which names that run first and says the overview's decisions are the later run's; the rest
    of the page is the one it would be without."""
    pages = _pages()
    superseded = [label for label in pages.published() if pages.PAGES[label].superseded_by]
    assert superseded, "the CIFAR split's first part is superseded by its eighth"
    for label in superseded:
        later = pages.PAGES[label].superseded_by
        assert later in pages.published()
        noted, plain = pages.generate(label), _generated_with(pages, label, superseded_by="")
        note = noted.split("```{note}", 1)[1].split("```", 1)[0]
        assert f"]({pages.PAGES[later].page.split('/')[-1]})" in note and f"#{later})" in note
        assert noted.replace(f"\n```{{note}}{note}```\n", "", 1) == plain


def test_set_tables_name_each_fpr_once_and_the_mean_what_it_averages():
    """Review of 2026-12-04: a set whose 10/#unknowns is one of the columns' FPRs printed the same CCR
    twice, and pages averaging near sets alone called their mean the mean D_a OSCR."""
    result = _result()  # 1,000 unknowns a set: 10/#unknowns is 0.01, a column's FPR
    text = site_page(result, "Split benchmark", "`run`", "figures")
    headers = [line for line in text.splitlines() if line.startswith("| approach/detector | AUROC")]
    assert headers and all("(10/#unknowns)" not in h and "CCR@1e-2" in h for h in headers)
    assert "## Every approach with every detector (mean near D_a OSCR)" in text
    result["test_sets"] = {name: 2500 for name in result["test_sets"]}  # 0.004: a column of its own
    headers = [line for line in site_page(result, "Split benchmark", "`run`", "figures").splitlines()
               if line.startswith("| approach/detector | AUROC")]
    assert all("CCR@0.004 (10/#unknowns)" in h for h in headers)


def test_a_single_near_set_is_not_shown_twice_beside_its_mean():
    """Review of 2026-12-04: with one near set, the paper's-rows table printed the mean near D_a OSCR
    and the same set's OSCR as two columns of equal cells."""
    result = _result()
    assert result["far_sets"] and len(result["ranked_sets"]) == 1
    near = result["ranked_sets"][0]

    def papers_header(result):
        text = site_page(result, "Split benchmark", "`run`", "figures")
        return next(line for line in text.splitlines() if line.startswith("| approach | detector | closed-set acc."))

    header = papers_header(result)
    assert "| mean near D_a OSCR |" in header and f"{near} (D_a) OSCR" not in header
    assert all(f"{name} " in header for name in result["far_sets"])
    result["ranked_sets"] = [near, *result["far_sets"][:1]]  # two near sets: each keeps its column
    assert f"{near} (D_a) OSCR" in papers_header(result)


def test_a_run_that_measures_a_machine_says_it_is_not_a_part():
    """A run that trains a part's networks again elsewhere (measures="...") is published with a note
    that it is not a part of the benchmark, and the overview's CIFAR parts leave it out."""
    pages = _pages()
    label = "bench-cifar-5-arpl-cac"
    page = _generated_with(pages, label, measures="whether a machine repeats them")
    note = page.split("```{note}", 1)[1].split("```", 1)[0]
    assert "This run measures whether a machine repeats them." in note and "not a part of the benchmark" in note
    assert page.replace(f"\n```{{note}}{note}```\n", "", 1) == pages.generate(label)
    runs = load_module("result_runs", ROOT / "docs/result_runs.py")
    assert all(not pages.PAGES[part].measures for part in runs.CIFAR_PARTS)


def test_a_page_ranked_by_a_metric_its_protocol_does_not_declare_says_so():
    """Review of 2026-12-05: 17 of 21 ranked pages ranked by a metric other than the one their protocol
    declares, without saying so. Such a page opens with a note naming both; a page whose metric is the
    declared one has none; the rest of the page is unchanged."""
    from agnostophobia.data.protocols import PROTOCOLS

    pages = _pages()
    noted = 0
    for label, entry, result in _published_runs(pages):
        protocol = pages.run_protocol(result)
        assert protocol in PROTOCOLS, f"{entry.results}: its command names no protocol"
        differs = PROTOCOLS.get(protocol).ranking_metric != result["ranking"]["chosen"]
        page = pages.generate(label)
        assert ("now declares the" in page.split("\n## ", 1)[0]) == differs, label
        noted += differs
    assert noted >= 1
    result = _result()
    result["meta"]["command"] = "agnostophobia benchmark lenet++ --seeds 3"
    result["ranking"]["chosen"] = PROTOCOLS.get("lenet++").ranking_metric
    agreeing = pages._with_declared_metric("# t\nbody", result, ROOT / "docs/guide")
    result["ranking"]["chosen"] = "auroc"
    assert agreeing == "# t\nbody" and "`lenet++`, now declares" in pages._with_declared_metric("# t\nbody", result,
                                                                                               ROOT / "docs/guide")
