"""The documentation's benchmark result pages, generated from the committed ``benchmark.json`` of
each published run by the code that writes the run's ``benchmark.md``
(:func:`agnostophobia.experiments.benchmark_report.site_page`): no number on them is typed by hand,
and a test (``tests/repository/test_result_pages.py``) regenerates each page and fails on any
difference.

Publish a finished run (its ``benchmark.json`` compact, its ``figures/benchmark_oscr_*.png``; of a
benchmark over splits, its ``benchmark-splits.json``)::

    python docs/result_pages.py publish RUN_DIR bench-lenet-5
    python docs/result_pages.py publish RUNS/osr-mnist bench-osr-mnist

Derive the published runs' sentences again after a rule that reads their numbers changed
(``resummarise``), then regenerate every page from the committed files (``check`` only says which
differ)::

    python docs/result_pages.py resummarise
    python docs/result_pages.py write
    python docs/result_pages.py check
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple

DOCS = Path(__file__).resolve().parent
#: The page whose entry, under each run's label, says how the run was made.
PROVENANCE_PAGE = "provenance.md"


class ResultPage(NamedTuple):
    """A published benchmark run and the page generated from it (paths relative to ``docs/``); the
    page names its run by a link to the run's entry in the provenance page."""

    page: str  # the generated page
    title: str  # its title
    results: str  # the run's committed benchmark.json (benchmark-splits.json for a benchmark over splits)
    figures: str  # the folder of the run's committed OSCR figures ("": a benchmark over splits has none)
    over_splits: bool = False  # a benchmark over a protocol's splits: its summary, not one run's report
    # the label of a later run that asks all of this run's questions again under conditions the others
    # share (one processor, one reference): this page stays, says so, and leaves the overview's decisions
    superseded_by: str = ""
    # with superseded_by: why the later run's answers are the ones read, and what this page stays for
    superseded_because: str = ""
    kept_for: str = ""
    # what the run measures where it is not a part of its protocol's benchmark (the same networks
    # trained again on another machine): its page says so, and the overview's tables leave it out
    measures: str = ""


#: The published runs, by their label in provenance.md. A label's page is generated once its
#: benchmark.json is committed; until then the page says that the run is not published yet.
PAGES: Dict[str, ResultPage] = {
    "bench-lenet-5": ResultPage("guide/benchmark-lenet.md", "LeNet++ benchmark: the full report",
                                "results/bench-lenet-5.json", "images/bench-lenet-5"),
    "bench-lenet-5-authors-prep": ResultPage(
        "guide/benchmark-lenet-authors-prep.md", "LeNet++, softmax and EOS with the authors' preparation: the full report",
        "results/bench-lenet-5-authors-prep.json", "images/bench-lenet-5-authors-prep",
        measures="whether preparing the images as the authors' code did (glyph sets inverted, Devanagari as "
                 "published, CIFAR-10 transposed and grey as BGR, bicubic resizing) moves the converged softmax's "
                 "Devanagari CCR toward the paper's"),
    "bench-lenet-5-authors-net": ResultPage(
        "guide/benchmark-lenet-authors-net.md", "LeNet++, softmax on the authors' network and preparation: the full report",
        "results/bench-lenet-5-authors-net.json", "images/bench-lenet-5-authors-net",
        measures="whether the authors' activation-free network, with their preparation, moves the softmax's "
                 "Devanagari CCR toward the paper's at the benchmark's budget (3 epochs)"),
    "bench-lenet-5-authors-net-12": ResultPage(
        "guide/benchmark-lenet-authors-net-12.md",
        "LeNet++, softmax on the authors' network and preparation, 12 epochs: the full report",
        "results/bench-lenet-5-authors-net-12.json", "images/bench-lenet-5-authors-net-12",
        measures="whether the authors' activation-free network, with their preparation, moves the softmax's "
                 "Devanagari CCR toward the paper's at four times the benchmark's epochs (12)"),
    "bench-lenet-5-confirm": ResultPage(
        "guide/benchmark-lenet-confirm.md", "LeNet++, the confirmatory run on fresh seeds: the full report",
        "results/bench-lenet-5-confirm.json", "images/bench-lenet-5-confirm",
        measures="whether the answers of the 5-seed LeNet++ benchmark hold on fresh networks (training seeds "
                 "5-9) read by rules declared before they trained: softmax and Objectosphere against Entropic "
                 "Open-Set on the log-FPR and the linear OSCR area"),
    "lenet-centred-unknowns": ResultPage(
        "guide/benchmark-lenet-centred.md", "LeNet++, softmax and EOS read on centred unknowns: the full report",
        "results/lenet-centred-unknowns.json", "images/lenet-centred-unknowns",
        measures="whether the frame MNIST leaves empty, which the D_a glyph sets fill, accounts for the converged "
                 "softmax's Devanagari CCR gap to the paper: the same networks read on the glyph sets as prepared "
                 "and centred as MNIST was made (benchmarks/centred_unknowns.py); this page reports them as "
                 "prepared"),
    "bench-cifar-5": ResultPage("guide/benchmark-cifar.md", "CIFAR-10 split benchmark: the full report",
                                "results/bench-cifar-5.json", "images/bench-cifar-5",
                                superseded_by="bench-cifar-5-arpl-cac",
                                superseded_because="whose networks share the processor and reference of the other parts",
                                kept_for="what its networks show across processors"),
    "bench-cifar-5-paper": ResultPage("guide/benchmark-cifar-paper.md",
                                      "CIFAR-10 split benchmark, the paper's losses: the full report",
                                      "results/bench-cifar-5-paper.json", "images/bench-cifar-5-paper"),
    "bench-cifar-5-more": ResultPage("guide/benchmark-cifar-more.md",
                                     "CIFAR-10 split benchmark, LogitNorm, VOS and maximal entropy: the full report",
                                     "results/bench-cifar-5-more.json", "images/bench-cifar-5-more"),
    "bench-cifar-5-ft": ResultPage("guide/benchmark-cifar-ft.md",
                                   "CIFAR-10 split benchmark, the Outlier Exposure fine-tune: the full report",
                                   "results/bench-cifar-5-ft.json", "images/bench-cifar-5-ft"),
    "bench-cifar-5-energy-ft": ResultPage("guide/benchmark-cifar-energy-ft.md",
                                          "CIFAR-10 split benchmark, the energy fine-tune: the full report",
                                          "results/bench-cifar-5-energy-ft.json",
                                          "images/bench-cifar-5-energy-ft"),
    "bench-cifar-5-mixoe-ft": ResultPage("guide/benchmark-cifar-mixoe-ft.md",
                                         "CIFAR-10 split benchmark, the MixOE fine-tune: the full report",
                                         "results/bench-cifar-5-mixoe-ft.json",
                                         "images/bench-cifar-5-mixoe-ft"),
    "bench-cifar-5-oe": ResultPage("guide/benchmark-cifar-oe.md",
                                   "CIFAR-10 split benchmark, Outlier Exposure from scratch: the full report",
                                   "results/bench-cifar-5-oe.json", "images/bench-cifar-5-oe"),
    "bench-cifar-5-arpl-cac": ResultPage("guide/benchmark-cifar-arpl-cac.md",
                                         "CIFAR-10 split benchmark, ARPL and CAC beside the shared reference: "
                                         "the full report", "results/bench-cifar-5-arpl-cac.json",
                                         "images/bench-cifar-5-arpl-cac"),
    "bench-cifar-5-xeon": ResultPage("guide/benchmark-cifar-xeon.md",
                                     "CIFAR-10 split, softmax and EOS on a Xeon again: the full report",
                                     "results/bench-cifar-5-xeon.json", "images/bench-cifar-5-xeon",
                                     measures="whether the networks of the split's first part repeat on a Xeon of "
                                              "another sitting (the same seeds, code and recipe)"),
    "bench-cifar-5-confirm": ResultPage(
        "guide/benchmark-cifar-confirm.md", "CIFAR-10 split, the confirmatory run on fresh seeds: the full report",
        "results/bench-cifar-5-confirm.json", "images/bench-cifar-5-confirm",
        measures="whether the split's primary answer (softmax against Entropic Open-Set) holds on fresh networks "
                 "(training seeds 5-9) read by rules declared before they trained, on the 10,000 unused training "
                 "images of dog and truck; this page reads the 2,000 test images, the secondary set"),
    "bench-cifar-5-room": ResultPage(
        "guide/benchmark-cifar-room.md", "CIFAR-10 split, the fine-tunes at 20 epochs: the full report",
        "results/bench-cifar-5-room.json", "images/bench-cifar-5-room",
        measures="whether the three fine-tunes, below the threshold at the split's 16-epoch budget, keep their "
                 "start networks' accuracy at 20 epochs, and how they then read against Entropic Open-Set, by "
                 "rules declared before the networks trained. *Converged* on this page means kept: not worse "
                 "than the fine-tune's own start network by a declared tolerance, on an interval; it is not "
                 "the threshold. The 20 epochs were meant to give softmax room above the threshold and gave "
                 "none, and the 20-epoch EOS reads higher than the 16-epoch one (How the benchmark decides, "
                 "\"What the convergence threshold costs\", sets both beside the 16-epoch networks)"),
    "bench-cifar-b-5": ResultPage("guide/benchmark-cifar-b.md",
                                  "CIFAR-10 split, second class partition (cat and ship unknown): the full report",
                                  "results/bench-cifar-b-5.json", "images/bench-cifar-b-5"),
    "bench-cifar-b-5-paper": ResultPage("guide/benchmark-cifar-b-paper.md",
                                        "CIFAR-10 split, second class partition, the paper's losses: the full "
                                        "report", "results/bench-cifar-b-5-paper.json",
                                        "images/bench-cifar-b-5-paper"),
    "bench-osr-mnist": ResultPage("guide/benchmark-osr-mnist.md", "MNIST 6/4 over its five splits",
                                  "results/bench-osr-mnist.json", "", over_splits=True),
    "bench-osr-mnist-split-0": ResultPage("guide/benchmark-osr-mnist-split-0.md",
                                          "MNIST 6/4, split 0 at 3 seeds: the full report with seed intervals",
                                          "results/bench-osr-mnist-split-0.json", "images/bench-osr-mnist-split-0",
                                          superseded_by="bench-osr-mnist-split-0-5",
                                          superseded_because="at 5 seeds on networks trained again on another "
                                                             "processor",
                                          kept_for="the projection of what 5 seeds would resolve, made from it "
                                                   "before the 5-seed run (How the benchmark decides, \"What 5 seeds "
                                                   "can resolve\")"),
    "bench-osr-mnist-split-0-5": ResultPage("guide/benchmark-osr-mnist-split-0-5.md",
                                            "MNIST 6/4, split 0 at 5 seeds: the full report with seed intervals",
                                            "results/bench-osr-mnist-split-0-5.json",
                                            "images/bench-osr-mnist-split-0-5"),
    "bench-osr-cifar10": ResultPage("guide/benchmark-osr-cifar10.md", "CIFAR-10 6/4 over its five splits",
                                    "results/bench-osr-cifar10.json", "", over_splits=True),
    "bench-osr-cifar10-split-0": ResultPage("guide/benchmark-osr-cifar10-split-0.md",
                                            "CIFAR-10 6/4, split 0 at 3 seeds: the full report with seed intervals",
                                            "results/bench-osr-cifar10-split-0.json",
                                            "images/bench-osr-cifar10-split-0",
                                            superseded_by="bench-osr-cifar10-split-0-5",
                                            superseded_because="at 5 seeds on networks trained again on another "
                                                               "processor",
                                            kept_for="the projection of what 5 seeds would resolve, made from it "
                                                     "before the 5-seed run (How the benchmark decides)"),
    "bench-osr-cifar10-split-0-5": ResultPage("guide/benchmark-osr-cifar10-split-0-5.md",
                                              "CIFAR-10 6/4, split 0 at 5 seeds: the full report with seed "
                                              "intervals",
                                              "results/bench-osr-cifar10-split-0-5.json",
                                              "images/bench-osr-cifar10-split-0-5"),
}


def published() -> List[str]:
    """The labels whose benchmark.json is committed: the pages generated from them."""
    return [label for label, entry in PAGES.items() if (DOCS / entry.results).is_file()]


def generate(label: str) -> str:
    """The page of run ``label``, generated from its committed benchmark.json."""
    from agnostophobia.experiments.benchmark_report import site_page
    from agnostophobia.experiments.benchmark_splits import splits_site_page

    entry = PAGES[label]
    result = json.loads((DOCS / entry.results).read_text(encoding="utf-8"))
    here = (DOCS / entry.page).parent
    provenance = Path(os.path.relpath(DOCS / PROVENANCE_PAGE, here)).as_posix()
    run_link = f"[`{label}`]({provenance}#{label})"
    if entry.over_splits:
        return splits_site_page(result, entry.title, run_link)
    page = site_page(result, entry.title, run_link, Path(os.path.relpath(DOCS / entry.figures, here)).as_posix())
    if entry.measures:
        title, rest = page.split("\n", 1)
        page = (f"{title}\n\n```{{note}}\nThis run measures {entry.measures}. It is not a part of the benchmark: "
                "the overview's tables and decisions leave it out.\n```\n" + rest)
    page = _with_declared_metric(page, result, here)
    if entry.superseded_by:
        later = PAGES[entry.superseded_by]
        title, rest = page.split("\n", 1)
        link = Path(os.path.relpath(DOCS / later.page, here)).as_posix()
        page = (f"{title}\n\n```{{note}}\nThis run's questions were asked again in [{later.title.split(':')[0]}]({link}) "
                f"([`{entry.superseded_by}`]({provenance}#{entry.superseded_by})), {entry.superseded_because}; the "
                f"overview's decisions are that run's. This page stays for {entry.kept_for}.\n```\n" + rest)
    return page


def run_protocol(result: Dict) -> str:
    """The protocol a run benchmarked: the first argument of its command (``agnostophobia benchmark
    PROTOCOL ...``)."""
    words = result.get("meta", {}).get("command", "").split()
    return words[2] if len(words) > 2 and words[:2] == ["agnostophobia", "benchmark"] else ""


def _with_declared_metric(page: str, result: Dict, here: Path) -> str:
    """``page`` with a note where its run ranks by a metric other than the one its protocol declares
    (:attr:`~agnostophobia.data.protocol_types.ProtocolSpec.ranking_metric`): the protocols declared
    theirs after most published runs, whose ranks follow the metric the run chose then (a review
    found 17 of 21 ranked pages ranking by another metric without saying so)."""
    from agnostophobia.data.protocols import PROTOCOLS
    from agnostophobia.experiments.ranking_candidates import RANKING_CANDIDATES

    protocol, chosen = run_protocol(result), result.get("ranking", {}).get("chosen")
    declared = PROTOCOLS.get(protocol).ranking_metric if protocol in PROTOCOLS else ""
    if not declared or not chosen or declared == chosen:
        return page
    statistics = Path(os.path.relpath(DOCS / "guide/benchmark-statistics.md", here)).as_posix()
    title, rest = page.split("\n", 1)
    return (f"{title}\n\n```{{note}}\nThis run ranks by the {RANKING_CANDIDATES[chosen]}, which "
            f"{'it declared with --ranking-metric' if result['ranking'].get('declared') else 'its rule chose on validation data'}; "
            f"its protocol, `{protocol}`, now declares the {RANKING_CANDIDATES[declared]} "
            f"([Choosing the ranking metric]({statistics}#choosing-the-ranking-metric)). The ranks and best rows "
            "on this page follow the run's metric; the test numbers of every metric are in its tables.\n```\n" + rest)


def portable_command(command: str) -> str:
    """The run's command with its ``--out`` folder as ``runs/NAME``: the path on the machine that
    ran it says nothing to a reader and names a machine the repository must not depend on."""
    return re.sub(r"--out (/\S+)", lambda m: f"--out runs/{Path(m.group(1)).name}", command)


def publish(run_dir: Path, label: str) -> None:
    """Copy a finished run's benchmark.json (compact) and OSCR figures into the documentation and
    write its page; of a benchmark over splits, the folder that holds its split folders and its
    benchmark-splits.json."""
    from agnostophobia.experiments.benchmark_splits import SPLITS_JSON

    entry = PAGES[label]
    source = run_dir / (SPLITS_JSON if entry.over_splits else "benchmark.json")
    result = json.loads(source.read_text(encoding="utf-8"))
    if "command" in result.get("meta", {}):
        result["meta"]["command"] = portable_command(result["meta"]["command"])
    (DOCS / entry.results).parent.mkdir(parents=True, exist_ok=True)
    (DOCS / entry.results).write_text(json.dumps(result, separators=(",", ":"), sort_keys=True) + "\n",
                                      encoding="utf-8")
    if entry.figures:
        (DOCS / entry.figures).mkdir(parents=True, exist_ok=True)
    for path in result.get("oscr_figures", {}).values():
        shutil.copyfile(run_dir / path, DOCS / entry.figures / Path(path).name)
    (DOCS / entry.page).write_text(generate(label), encoding="utf-8")


def resummarise() -> List[str]:
    """Derive each published run's "what the data says" (``summary``) again from its per-seed numbers
    under the current rules, where a rule changed after the run (the rank's "beats", 2026-12-05:
    Holm-adjusted over a group's pairs), and write the JSON back as :func:`publish` does; the labels
    whose summary changed. The numbers are the run's; only sentences derived from them change."""
    from agnostophobia.experiments.benchmark_summary import what_the_data_says

    changed = []
    for label in published():
        entry = PAGES[label]
        if entry.over_splits:
            continue
        result = json.loads((DOCS / entry.results).read_text(encoding="utf-8"))
        summary = what_the_data_says(result)
        if summary != result["summary"]:
            result["summary"] = summary
            (DOCS / entry.results).write_text(json.dumps(result, separators=(",", ":"), sort_keys=True) + "\n",
                                              encoding="utf-8")
            changed.append(label)
    return changed


def main(argv: List[str]) -> int:
    if argv[:1] == ["publish"] and len(argv) == 3:
        publish(Path(argv[1]), argv[2])
        return 0
    if argv == ["resummarise"]:
        for label in resummarise():
            print(f"{PAGES[label].results}: summary derived again")
        return 0
    if argv in (["write"], ["check"]):
        stale = [label for label in published()
                 if (DOCS / PAGES[label].page).read_text(encoding="utf-8") != generate(label)]
        if argv == ["write"]:
            for label in stale:
                (DOCS / PAGES[label].page).write_text(generate(label), encoding="utf-8")
        for label in stale:
            print(f"{PAGES[label].page}: {'rewritten' if argv == ['write'] else 'differs'} from {PAGES[label].results}")
        return 1 if stale and argv == ["check"] else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
