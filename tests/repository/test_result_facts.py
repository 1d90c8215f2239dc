"""The benchmark's hand-written pages cite the published runs' numbers through ``{{ name }}``, which the
site build fills in from their committed benchmark.json (docs/result_facts.py), never typed by hand
(issue 55 item 7): every name a page cites is computed, every computed number is cited, the pages that
cite results hold no decimal typed by hand, and the numbers are what the runs hold."""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from scipy import optimize, stats

from agnostophobia.experiments.benchmark_comparisons import ALPHA, MARGIN
from agnostophobia.experiments.benchmark_report import PAPER_GAP
from agnostophobia.experiments.benchmark_rows import CEILING_GAP, papers_detector, papers_rows
from agnostophobia.experiments.benchmark_summary import MARGINS_AGAIN
from agnostophobia.metrics import PairedDifference, paired_difference
from repo_paths import REPO as ROOT, load_module

#: The pages that cite the published runs and may type no result by hand.
COMPUTED_PAGES = ("docs/guide/benchmark.md", "docs/guide/benchmark-statistics.md")
CITED = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@pytest.fixture(scope="module")
def facts_module():
    return load_module("result_facts", ROOT / "docs/result_facts.py")


def _pages():
    return {path: path.read_text(encoding="utf-8") for path in (ROOT / "docs").rglob("*.md")
            if "_build" not in path.parts}


def test_every_cited_name_is_computed(facts_module):
    unknown = {(path.relative_to(ROOT).as_posix(), name) for path, text in _pages().items()
               for name in CITED.findall(text) if name not in facts_module.FACTS}
    assert not unknown, f"pages cite numbers docs/result_facts.py does not compute: {sorted(unknown)}"


def test_every_computed_number_is_cited(facts_module):
    cited = {name for text in _pages().values() for name in CITED.findall(text)}
    assert not set(facts_module.FACTS) - cited, f"computed and cited nowhere: {sorted(set(facts_module.FACTS) - cited)}"


def test_each_number_computes_to_a_finite_value(facts_module):
    for name, value in facts_module.facts().items():
        assert value and not re.search(r"nan|inf", value, re.IGNORECASE), f"{name}: {value!r}"


def _declared_constants(facts_module):
    """The decimals these sections may print as they are: the rules' constants, each read from the code
    that declares it (the margin and the margins it is decided at again, the level, the ceiling's gap,
    the gap to the paper that is named) and the protocols' thresholds from their runs."""
    thresholds = {facts_module.run(label)["min_accuracy"] for label in ("bench-lenet-5", "bench-cifar-5")}
    values = {MARGIN, ALPHA, CEILING_GAP, PAPER_GAP, *MARGINS_AGAIN, *thresholds}
    return {f"{v:g}" for v in values} | {f"{v:.2f}" for v in thresholds}


def _typed_decimals(text: str) -> set:
    """The decimals of Markdown ``text`` outside ``{{ name }}``, link targets and code blocks (commands)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    text = re.sub(r"\]\([^)]*\)", "]", CITED.sub("", text))
    return set(re.findall(r"(?<![\w.])[−-]?\d+\.\d+", text))


@pytest.mark.parametrize("page", COMPUTED_PAGES)
def test_pages_that_cite_runs_type_no_result(page, facts_module):
    """A decimal in these sections is a run's number, so it must come from a run; the rules' declared
    constants are the exception."""
    typed = _typed_decimals((ROOT / page).read_text(encoding="utf-8")) - _declared_constants(facts_module)
    assert not typed, f"{page}: numbers typed by hand, cite them from docs/result_facts.py: {sorted(typed)}"


def test_the_check_fails_on_a_typed_number():
    """The section check reads what a hand-typed number looks like (so that it can fail)."""
    text = ("softmax (0.649) and {{ cifar_cac }} [a](https://arxiv.org/abs/2110.06207)\n"
            "```\nagnostophobia benchmark x.yaml --min-accuracy 0.9\n```\n")
    assert _typed_decimals(text) == {"0.649"}


def test_numbers_are_the_runs(facts_module):
    """Recomputed here from the JSON by other means than the module's: a near D_a area as the mean of
    the per-seed means, a range of seeds, a paired shift and a family's resolution."""
    f = facts_module
    cifar = f.run("bench-cifar-5-ft")
    softmax = next(r for r in cifar["rows"] if r["row"] == "softmax")
    per_seed, val = softmax["mean_oscr_per_seed"], softmax["accuracy_per_seed"]["val"]
    first_row = next(line for line in f.facts()["cifar_parts_table"].splitlines()
                     if line.startswith(f"| [4]({f.PAGES['bench-cifar-5-ft'].page.split('/')[-1]}), ")
                     and "| softmax | softmax |" in line)
    assert not any(line.startswith("| [1]") for line in f.facts()["cifar_parts_table"].splitlines())  # superseded
    assert f"| {sum(per_seed) / len(per_seed):.3f} [" in first_row
    half = stats.t.ppf(0.975, len(val) - 1) * np.std(val, ddof=1) / np.sqrt(len(val))  # 95 % t interval over seeds
    assert f"| {np.mean(val):.3f} [{np.mean(val) - half:.3f}, {np.mean(val) + half:.3f}] |" in first_row
    assert "| worse (beyond margin) |" in first_row  # -0.031 [-0.038, -0.023]: the whole interval past -0.005
    first, second = (next(r for r in f.run(label)["rows"] if r["row"] == "entropic")["mean_oscr_per_seed"]
                     for label in ("bench-cifar-5", "bench-cifar-5-paper"))
    assert f.facts()["eos_rerun_shift"] == f"{np.mean(np.subtract(first, second)):.3f}"
    # Welch's test by its formula: the Welch-Satterthwaite degrees of freedom, a two-sided t tail
    va, vb = np.var(first, ddof=1) / len(first), np.var(second, ddof=1) / len(second)
    t = (np.mean(first) - np.mean(second)) / np.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(first) - 1) + vb ** 2 / (len(second) - 1))
    table = f.facts()["processor_table"].splitlines()
    header = [c.strip() for c in table[0].strip("|").split("|")]
    eos_line = next(line for line in table if line.startswith("| entropic ("))
    cells = dict(zip(header, (c.strip() for c in eos_line.strip("|").split("|"))))
    assert cells["p"] == f"{2 * stats.t.sf(abs(t), df):.3f}"
    paired = stats.ttest_rel(first, second)  # the comparison as declared: paired by seed
    assert cells["paired by seed [95 % interval], p"].endswith(f", p {paired.pvalue:.3f}")
    differences = np.subtract(first, second)
    assert cells["per seed"] == f"{differences.min():+.3f} to {differences.max():+.3f}"
    again = f.row("bench-cifar-5-xeon", "entropic")  # the same seeds on a Xeon of another sitting
    repeats = sum(a == b and x == y for a, b, x, y in zip(
        again["mean_oscr_per_seed"], first, again["accuracy_per_seed"]["val"],
        f.row("bench-cifar-5", "entropic")["accuracy_per_seed"]["val"]))
    assert cells["Xeon again (seeds repeating)"].endswith(f"({repeats} of 5)")
    assert f.facts()["lenet_detectors_tests"] == str(len(f.run("bench-lenet-5")["tests"]["detectors"]))


def test_equivalent_calls_at_the_ceiling_by_hand(facts_module):
    """LeNet++'s equivalent calls between two converged rows whose mean D_a OSCR (the mean of its
    per-seed values) lies within CEILING_GAP of their mean test accuracy, counted from the JSON."""
    lenet = facts_module.run("bench-lenet-5")
    capped = {r["row"] for r in lenet["rows"] if r["converged"] is not False and r["mean_oscr_per_seed"]
              and np.mean(r["accuracy_per_seed"]["test"]) - np.mean(r["mean_oscr_per_seed"]) < CEILING_GAP}
    calls = [t for tests in lenet["tests"].values() for t in tests if t["decision"] == "equivalent"]
    both = sum(t["row"] in capped and t["against"] in capped for t in calls)
    assert facts_module.facts()["lenet_equivalent_at_ceiling"] == f"{both} of its {len(calls)}"
    assert 0 < both < len(calls)


def test_pooled_holm_by_hand(facts_module):
    """Holm's step-down by hand over the pooled p-values gives the module's largest *worse*."""
    f = facts_module
    distinct = {}
    for label in f.DECIDING_PARTS:
        for t in f.run(label)["tests"]["primary"]:
            distinct[(t["row"], t["against"], round(t["difference"], 12))] = t
    tests = sorted(distinct.values(), key=lambda t: t["p"])
    m, running, adjusted = len(tests), 0.0, []
    for k, t in enumerate(tests):
        running = max(running, min(1.0, (m - k) * t["p"]))
        adjusted.append(running)
    worse = max(p for p, t in zip(adjusted, tests) if t["decision"] == "worse")
    assert f.facts()["pooled_worse"] == f"{worse:.4f}"


def test_knowns_only_family_by_hand(facts_module):
    """The knowns-only family computed from the stored runs: each converged approach trained without
    negatives against softmax, seeds' SE by scipy's paired t, the samples' share bounded by the sum of
    the two stored shares against the reference, Holm by hand within each protocol."""
    f = facts_module
    table = f.facts()["knowns_only_table"]
    for protocol, labels in f.result_against_softmax.KNOWNS_ONLY_RUNS.items():
        rows = {r["row"]: r for label in labels for r in f.run(label)["rows"]}
        primary = {t["row"]: t for label in labels for t in f.run(label)["tests"]["primary"]}
        tested = [r for r in rows.values() if r["row"] in primary and not (r["negatives"] or r["extra_data"])
                  and r["approach"] != "softmax"]
        base = next(r for r in rows.values() if r["approach"] == r["detector"] == "softmax")
        assert tested, f"{protocol}: no approach trained on the knowns alone is tested"
        p = []
        for r in tested:
            a, b = np.asarray(r["mean_oscr_per_seed"]), np.asarray(base["mean_oscr_per_seed"])
            se_seeds = stats.sem(a - b)
            assert (a - b).mean() / se_seeds == pytest.approx(stats.ttest_rel(a, b).statistic)
            se = np.hypot(se_seeds, primary[r["row"]]["se_samples"] + primary[base["row"]]["se_samples"])
            p.append(2 * stats.t.sf(abs((a - b).mean()) / se, len(a) - 1))
            line = next(line for line in table.splitlines()
                        if line.startswith(f"| {protocol} | {r['approach']} ({r['detector']}) |"))
            assert f"| {(a - b).mean():+.3f} [".replace("-", "−") in line
            assert f"| {se_seeds:.4f}, " in line
        order = np.argsort(p)  # Holm: the k-th smallest p times (m - k), running maximum
        adjusted = np.maximum.accumulate([min(1.0, (len(p) - k) * p[i]) for k, i in enumerate(order)])
        for k, i in enumerate(order):
            line = next(line for line in table.splitlines()
                        if line.startswith(f"| {protocol} | {tested[i]['approach']} ("))
            assert line.split(" | ")[-3] == f"{adjusted[k]:.3f}"  # before the decision and the accuracies


def test_accuracy_rule_by_hand(facts_module):
    """The convergence rule with an interval read on the CIFAR split: each approach's validation
    accuracy minus softmax's on the same seeds, scipy's paired 90 % interval, its low end against
    minus each margin; and the threshold's verdict on the mean."""
    f = facts_module
    rules = f.result_against_softmax
    table = f.facts()["accuracy_rule_table"].splitlines()
    softmax = f.paper_row(f.CIFAR_REPORT, "softmax")["accuracy_per_seed"]["val"]
    assert len(table) == 2 + len(rules._accuracy_rows())
    for line in table[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        mine = rules._accuracy_rows()[table[2:].index(line)]["accuracy_per_seed"]["val"]
        assert cells[0] == rules._accuracy_rows()[table[2:].index(line)]["approach"]
        low = stats.ttest_rel(mine, softmax).confidence_interval(0.90).low
        assert cells[2].startswith(f"{np.mean(np.subtract(mine, softmax)):+.3f} [{low:+.3f},".replace("-", "−"))
        assert cells[3] == ("yes" if np.mean(mine) >= 0.9 else "no")
        derived = 2 * np.sqrt(0.9 * 0.1 / f.paper_row(f.CIFAR_REPORT, "softmax")["val"]["num_known"])
        assert cells[4:] == ["yes" if low > -margin else "no" for margin in (derived / 2, derived, 2 * derived)]


def test_near_set_by_hand(facts_module):
    """The second readings of the CIFAR split's near unknowns (one record per class partition): on each
    set, every test's difference and seeds' share from its stored per-seed areas by scipy's paired t,
    its p with the samples' share added, Holm by hand within the family, and the decision by the
    declared rule; the table's counts from them."""
    near = facts_module.result_near_set
    table = facts_module.facts()["near_set_table"].splitlines()
    for protocol in near.NEAR_SET_RECORDS:
        record = near.near_set(protocol)
        assert set(record["tests"]) == {record["published_set"], record["added_set"]}
        for name, families in record["tests"].items():
            oscr = record["oscr_per_seed"][name]
            for tests in families.values():
                p, decided = [], []
                for t in tests:
                    a, b = np.asarray(oscr[t["row"]]), np.asarray(oscr[t["against"]])
                    assert (a - b).mean() == pytest.approx(t["difference"], abs=1e-12)
                    assert stats.sem(a - b) == pytest.approx(t["se_seeds"])
                    se = np.hypot(stats.sem(a - b), t["se_samples"])
                    p.append(2 * stats.t.sf(abs((a - b).mean()) / se, len(a) - 1))
                    half = stats.t.ppf(1 - ALPHA, len(a) - 1) * se
                    decided.append(((a - b).mean(), abs((a - b).mean()) + half < MARGIN))  # the 90 % interval inside
                order = np.argsort(p)
                adjusted = np.empty(len(p))
                adjusted[order] = np.maximum.accumulate([min(1.0, (len(p) - k) * p[i]) for k, i in enumerate(order)])
                for t, holm_p, (difference, inside) in zip(tests, adjusted, decided):
                    assert t["p_holm"] == pytest.approx(holm_p)
                    verdict = ("better" if difference > 0 else "worse") if holm_p < ALPHA and abs(difference) >= MARGIN \
                        else "equivalent" if inside else "not resolved"
                    assert t["decision"] == verdict, t["row"]
        equivalence_bar = MARGIN / stats.t.ppf(1 - ALPHA, record["seeds"] - 1)
        lines = [line for line in table[2:] if line.startswith(f"| {near.PARTITIONS[protocol]} |")]
        assert lines
        for line in lines:
            family, count, reach = [c.strip() for c in line.strip("|").split("|")][1:4]
            published, added = (record["tests"][record[f"{w}_set"]][family] for w in ("published", "added"))
            assert int(count) == len(published)
            assert reach == " / ".join(str(sum(t["se_samples"] < equivalence_bar for t in tests))
                                       for tests in (published, added))


def test_second_partition_beside_the_first(facts_module):
    """The overview's table of the CIFAR split's second class partition: per approach and run, the
    primary test's difference and decision as the run's JSON stores them (or why there is none), the
    first partition's cell from the part that trained the approach, and the sentence that says which
    decisions repeat and which the second partition decides alone."""
    f, partition = facts_module, facts_module.result_partition
    table = f.facts()["partition_table"].splitlines()
    second = f.run(partition.SECOND_PARTITION)
    approaches = [a for a in dict.fromkeys(r["approach"] for r in second["rows"]) if a != second["reference"]]
    assert [line.split(" | ")[0].strip("| ") for line in table[2:]] == approaches
    repeated, not_repeated, newly = [], [], []
    for line, approach in zip(table[2:], approaches):
        part = next((label for label in (f.CIFAR_REPORT, *f.DECIDING_PARTS) if any(
            r["approach"] == approach for r in f.run(label)["rows"])), None)
        cells = [c.strip() for c in line.strip("|").split("|")][1:]
        suffix = f" ([part {f.CIFAR_PARTS.index(part) + 1}]({f.PAGES[part].page.split('/')[-1]}))"
        assert cells[0].endswith(suffix)
        cells[0] = cells[0][:-len(suffix)]
        for cell, label in zip(cells, [part, partition.FIRST_XEON, *partition.SECOND_RUNS]):
            test = next((t for t in f.run(label)["tests"]["primary"] if t["approach"] == approach
                         and t["detector"] == papers_detector(approach)), None)
            if test is None:
                assert cell.startswith(("not ", "no test")), cell
            else:
                assert cell.startswith(f"{test['difference']:+.3f}".replace("-", "−"))
                assert re.search(rf"\*{test['decision']}( \(beyond margin\)| \({test['seeds']} seeds\))?\*", cell), cell
            accuracy = f.run(label)["accuracy"].get(approach)
            val = None if accuracy is None else accuracy["val"]
            assert val is None or cell.endswith(f"accuracy {val['mean']:.3f} [{val['low']:.3f}, {val['high']:.3f}]"), cell
        first = next((t for t in f.run(part)["tests"]["primary"] if t["approach"] == approach
                         and t["detector"] == papers_detector(approach)), None)
        again = next((t for t in second["tests"]["primary"] if t["approach"] == approach
                         and t["detector"] == papers_detector(approach)), None)
        if first is not None and first["decision"] != "not resolved":
            (repeated if again is not None and again["decision"] == first["decision"] else not_repeated).append(approach)
        elif again is not None and again["decision"] != "not resolved":
            newly.append(approach)
    said = f.facts()["partition_repeated"]
    assert all(a in said.split(";")[0] for a in repeated) and all(a in said for a in not_repeated + newly)


def test_partitions_rank_agreement_by_hand(facts_module):
    """Spearman's rho between the partitions' mean near D_a OSCR of the rows both converged,
    recomputed as the Pearson correlation of average ranks (numpy), each row's first-partition value
    from the part that trained its approach."""
    f, partition = facts_module, facts_module.result_partition
    first, second = [], []
    for row in f.run(partition.SECOND_PARTITION)["rows"]:
        part = next((label for label in (f.CIFAR_REPORT, *f.DECIDING_PARTS) if any(
            r["approach"] == row["approach"] for r in f.run(label)["rows"])), None)
        match = [r for r in (f.run(part)["rows"] if part else []) if (r["approach"], r["detector"]) ==
                 (row["approach"], row["detector"]) and r["converged"] and row["converged"]]
        if match and match[0]["mean_oscr_per_seed"] and row["mean_oscr_per_seed"]:
            first.append(sum(match[0]["mean_oscr_per_seed"]) / len(match[0]["mean_oscr_per_seed"]))
            second.append(sum(row["mean_oscr_per_seed"]) / len(row["mean_oscr_per_seed"]))
    rho = np.corrcoef(stats.rankdata(first), stats.rankdata(second))[0, 1]
    assert f.facts()["partition_rank_agreement"].startswith(f"ρ = {rho:.2f} over {len(first)} rows")
    assert len(first) >= 20


def test_the_declared_ranking_metrics_are_the_rules_choice_by_hand(facts_module):
    """Each protocol's declared ranking metric is the candidate with the largest median separation of
    its pooled validation pairs, recomputed here from the committed rows: every pair of converged
    approaches trained on the known classes only, with their papers' detectors, within one run, each
    pair of identical networks once; the runs read are every published ranking run of the protocol."""
    ranking = facts_module.result_ranking
    from agnostophobia.experiments.benchmark_rows import papers_rows, rankable, saw_negatives
    from agnostophobia.experiments.ranking_candidates import RANKING_CANDIDATES
    from agnostophobia.metrics import seed_interval

    assert set(ranking.DECLARED) == {facts_module.run(label)["meta"]["experiment"] for label in ranking.DECLARED_FROM}
    for protocol, declared in ranking.DECLARED.items():
        medians = {}
        for metric in RANKING_CANDIDATES:
            pairs = {}
            for label in ranking.runs_of(protocol):
                rows = [r for r in papers_rows(facts_module.run(label)["rows"]) if rankable(r)
                        and len(r["val"]["per_seed"].get(metric) or []) >= 2 and None not in r["val"]["per_seed"][metric]]
                for a in rows:
                    for b in rows:
                        va, vb = a["val"]["per_seed"][metric], b["val"]["per_seed"][metric]
                        key = tuple(sorted([(a["approach"], tuple(va)), (b["approach"], tuple(vb))]))
                        if saw_negatives(a) or saw_negatives(b) or key[0] == key[1]:
                            continue
                        half = [seed_interval(v).high - np.mean(v) for v in (va, vb)]
                        pairs[key] = abs(np.mean(va) - np.mean(vb)) / np.mean(half) if np.mean(half) > 0 else math.inf
            medians[metric] = float(np.median(list(pairs.values())))
        assert max(medians, key=lambda m: (medians[m], -list(RANKING_CANDIDATES).index(m))) == declared, protocol
        assert ranking.chosen(protocol) == declared
    from agnostophobia.data.protocols import PROTOCOLS

    for experiment, protocols in ranking.PROTOCOLS_OF.items():  # one declaration, on every protocol of the experiment
        assert {PROTOCOLS.get(name).ranking_metric for name in protocols} == {ranking.DECLARED[experiment]}
    assert all(label in facts_module.PAGES and not facts_module.PAGES[label].over_splits
               for label in ranking.DECLARED_FROM)


def test_the_margin_against_the_declared_metrics_half_width_by_hand(facts_module):
    """The half-width the margin is set beside, per protocol: the median over the rows the ranking rule
    reads (converged, paper's detector, knowns only, each network set once) of the declared metric's
    95 % t half-width over seeds on validation, recomputed with scipy's t."""
    from scipy import stats

    from agnostophobia.experiments.benchmark_rows import papers_rows, rankable, saw_negatives

    ranking = facts_module.result_ranking
    for protocol, metric in ranking.DECLARED.items():
        widths = {}
        for label in ranking.runs_of(protocol):
            for row in papers_rows(facts_module.run(label)["rows"]):
                values = row["val"]["per_seed"].get(metric) or []
                if rankable(row) and not saw_negatives(row) and len(values) >= 2 and None not in values:
                    n = len(values)
                    widths[(row["approach"], tuple(values))] = (stats.t.ppf(0.975, n - 1) * np.std(values, ddof=1)
                                                                / math.sqrt(n))
        assert ranking.declared_half_width(protocol) == pytest.approx(float(np.median(list(widths.values()))), rel=1e-9)
    said = ranking.margin_in_ranking_units()
    assert said.count("the margin") == len(ranking.DECLARED)


def test_which_criterion_binds_a_rank_by_hand(facts_module):
    """The counts of pairs a rank's margin and its test block, recomputed on one run with scipy's paired
    t-test and Holm's step-down written out: every pair of ranked rows within a group, the test's p
    taken as 1 where the difference does not vary over seeds (to 1e-12)."""
    from agnostophobia.experiments.benchmark_rows import rankable, saw_negatives

    label = "bench-cifar-5"
    result = facts_module.run(label)
    metric = result["ranking"]["chosen"]
    counts = {"beats": 0, "margin": 0, "test": 0, "both": 0}
    for negatives in (False, True):
        group = [r for r in result["rows"] if rankable(r) and r["rank"] is not None and saw_negatives(r) == negatives]
        found = []
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                va, vb = np.asarray(a["val"]["per_seed"][metric]), np.asarray(b["val"]["per_seed"][metric])
                d = va - vb
                p = 1.0 if np.ptp(d) <= 1e-12 else stats.ttest_rel(va, vb).pvalue
                found.append((abs(d.mean()), p))
        order, running, adjusted = np.argsort([p for _, p in found], kind="stable"), 0.0, [0.0] * len(found)
        for k, i in enumerate(order):
            running = max(running, min(1.0, (len(found) - k) * found[i][1]))
            adjusted[i] = running
        for (difference, _), p_holm in zip(found, adjusted):
            if difference == 0:
                continue
            small, unresolved = difference < MARGIN - 1e-12, p_holm >= ALPHA
            counts["both" if small and unresolved else "margin" if small else "test" if unresolved else "beats"] += 1
    assert facts_module.result_ranking.binding_criteria(label) == counts
    assert sum(counts.values()) > 100


def test_fine_tunes_against_eos_by_hand(facts_module):
    """Every fine-tune is described against EOS alike: its paper's-detector row's mean near D_a OSCR
    minus EOS's on each seed of its part, the smallest and largest difference and the seeds above."""
    said = facts_module.facts()["ft_against_eos"]
    parts = facts_module.result_fine_tunes.FINE_TUNE_PARTS
    assert said.count("above on") == len(parts)
    for label, approach in parts.items():
        rows = papers_rows(facts_module.run(label)["rows"])
        mine = next(r for r in rows if r["approach"] == approach)["mean_oscr_per_seed"]
        eos = next(r for r in rows if r["approach"] == "entropic")["mean_oscr_per_seed"]
        above = [a - b for a, b in zip(mine, eos)]
        low, high = (f"{v:+.3f}".replace("-", "−") for v in (min(above), max(above)))
        assert f"`{approach}` {low} to {high}, above on {sum(d > 0 for d in above)} of {len(above)} seeds" in said


def _beyond_by_hand(tests):
    """Each test's minimum-effect call by its formula: p = 2 P(T > (|d| - margin) / se) with seeds - 1
    degrees of freedom (1 where |d| <= margin), Holm's step-down by hand over the family."""
    p = [min(1.0, 2 * stats.t.sf((abs(t["difference"]) - MARGIN) / t["se"], t["seeds"] - 1))
         if abs(t["difference"]) > MARGIN else 1.0 for t in tests]
    order, passed, beyond = np.argsort(p, kind="stable"), True, [False] * len(p)
    for k, i in enumerate(order):  # step down: stop at the first p above alpha / (m - k)
        passed = passed and p[i] < ALPHA / (len(p) - k)
        beyond[i] = passed
    return beyond


def test_calls_beyond_the_margin_by_hand(facts_module):
    """The deciding families' better or worse calls on the pages that decide, recounted from the JSON:
    the minimum-effect test by hand, a call repeated on the same networks with the same outcome once."""
    f = facts_module
    seen, beyond_count = set(), 0
    for label in f.published():
        result = f.run(label)
        if f.PAGES[label].superseded_by or "tests" not in result:
            continue
        for family in ("primary", "knowns"):
            tests = result["tests"].get(family, [])
            for t, beyond in zip(tests, _beyond_by_hand(tests)):
                key = (family, t["row"], t["against"], t["difference"], beyond)
                if t["decision"] in ("better", "worse") and key not in seen:
                    seen.add(key)
                    beyond_count += beyond
    assert f.facts()["deciding_beyond_margin"].startswith(f"in {beyond_count} of {len(seen)}")
    assert 0 < beyond_count < len(seen)  # both outcomes occur, so the count can fail either way


def test_the_authors_preparation_reading_by_hand(facts_module):
    """The declared reading of the authors' preparation, recomputed: each run's seed deviation from its
    published 95 % t interval, Welch's interval with the degrees of freedom that make scipy's Welch
    p-value (ttest_ind_from_stats) agree, and the decision against the margin."""
    cells = [facts_module.row(label, "softmax")["test"]["devanagari"]["ccr_at_lowest_fpr"]
             for label in ("bench-lenet-5-authors-prep", "bench-lenet-5")]
    (m1, s1, n1), (m2, s2, n2) = [(c["mean"], (c["high"] - c["low"]) / 2 / stats.t.ppf(0.975, c["seeds"] - 1)
                                   * np.sqrt(c["seeds"]), c["seeds"]) for c in cells]
    welch = stats.ttest_ind_from_stats(m1, s1, n1, m2, s2, n2, equal_var=False)
    se = (m1 - m2) / welch.statistic
    df = optimize.brentq(lambda d: 2 * stats.t.sf(abs(welch.statistic), d) - welch.pvalue, 1, 1000)
    half = stats.t.ppf(0.975, df) * se
    low, high = sorted((m1 - m2 - half, m1 - m2 + half))
    said = facts_module.facts()["authors_prep_gap"]
    assert said.startswith(f"{m1 - m2:+.3f} [{low:+.3f}, {high:+.3f}]".replace("-", "−"))
    if high < -MARGIN:
        assert said.endswith("accounts for at least the margin of the gap")
    elif -MARGIN < low and high < MARGIN:
        assert said.endswith("ruled out as the cause at convergence")
    else:
        assert said.endswith("not resolved at 5 seeds")


@pytest.mark.parametrize("label", ["bench-lenet-5", "bench-lenet-5-confirm"])
def test_the_confirmatory_reading_by_hand(facts_module, label):
    """The four declared tests of the confirmatory run (and the same reading of the run it repeats),
    recomputed: the log-FPR area's paired t over seeds by scipy (ttest_rel's 90 % and 95 % intervals),
    the linear area's stored test, the minimum-effect test and Holm by hand over the four."""
    prefix = "confirm" if label.endswith("confirm") else "exploratory"
    rows = {r["row"]: r for r in facts_module.run(label)["rows"]}
    tests, intervals = [], []
    for name in ("softmax", "objectosphere"):
        for metric in ("oscr_log", "oscr"):
            if metric == "oscr_log":
                first, reference = rows[name]["mean_da_per_seed"][metric], rows["entropic"]["mean_da_per_seed"][metric]
                paired = stats.ttest_rel(first, reference)
                d = float(np.mean(np.subtract(first, reference)))
                se, seeds = d / paired.statistic, len(first)
                intervals.append([paired.confidence_interval(c) for c in (0.90, 0.95)])
            else:
                # the stored test's sample part only; its difference and seed part from the rows
                stored = next(t for t in facts_module.run(label)["tests"]["primary"]
                              if t["row"] == name and t["against"] == "entropic")
                per_seed = np.subtract(rows[name]["mean_da_per_seed"][metric], rows["entropic"]["mean_da_per_seed"][metric])
                d, seeds = float(np.mean(per_seed)), len(per_seed)
                se = math.hypot(np.std(per_seed, ddof=1) / math.sqrt(seeds), stored["se_samples"])
                assert d == pytest.approx(stored["difference"], abs=1e-12) and se == pytest.approx(stored["se"], rel=1e-9)
                half = [stats.t.ppf((1 + c) / 2, seeds - 1) * se for c in (0.90, 0.95)]
                intervals.append([(d - h, d + h) for h in half])
            tests.append({"difference": d, "se": abs(se), "seeds": seeds, "name": name, "metric": metric})
    for t, beyond, (ninety, ninety_five) in zip(tests, _beyond_by_hand(tests), intervals):
        low, high = ninety_five
        said = facts_module.facts()[f"{prefix}_{t['name']}_{'log' if t['metric'] == 'oscr_log' else 'linear'}"]
        assert said.startswith(f"{t['difference']:+.4f} [{low:+.4f}, {high:+.4f}]".replace("-", "−")), said
        call = ("better" if t["difference"] > 0 else "worse") if beyond else \
            "equivalent" if -MARGIN < ninety[0] and ninety[1] < MARGIN else "not resolved"
        ceiling = all(rows[r]["closed_set_accuracy"]["mean"] - np.mean(rows[r]["mean_da_per_seed"][t["metric"]]) < CEILING_GAP
                      for r in (t["name"], "entropic"))
        call += " (at ceiling)" if call == "equivalent" and ceiling else ""
        assert said.endswith(f"*{call}*"), (said, call)


def test_the_confirmatory_calls_on_edge_cases():
    """The declared reading's calls where they are easy to get wrong: a difference with no spread is
    not resolved (never equivalent), and a test that is not read stays in the Holm family with p 1,
    so it still costs the tests that are read."""
    confirmatory = load_module("result_confirmatory", ROOT / "docs/result_confirmatory.py")
    still = paired_difference([0.70] * 5, [0.70] * 5)
    (call,) = confirmatory.decide({("softmax", "oscr"): still})
    assert still.se == 0 and call["call"] == "not resolved"
    # the minimum-effect p is 0.035: below 0.05 alone, above it once Holm doubles it
    se = 0.004
    excess = stats.t.isf(0.035 / 2, 4) * se
    beyond = PairedDifference(-(MARGIN + excess), se, se, 0.0, 4, 0.0, 5)
    alone = confirmatory.decide({("softmax", "oscr"): beyond})
    assert alone[0]["call"] == "worse" and alone[0]["p_holm"] == pytest.approx(0.035)
    with_unread = confirmatory.decide({("softmax", "oscr"): beyond, ("softmax", "oscr_log"): "not converged"})
    assert [t["call"] for t in with_unread] == ["not resolved", "not converged"]
    assert with_unread[0]["p_holm"] == pytest.approx(0.07)


@pytest.mark.parametrize("which_run", ["exploratory", "label"])
def test_the_cifar_confirmatory_reading_by_hand(which_run, tmp_path, monkeypatch):
    """The CIFAR reading of the exploratory run (its prediction) and of the confirmatory run
    recomputed from each record alone: the log-FPR area's paired t over seeds by scipy (and with the
    record's test-sample share added), the linear area's stored test; a record of another run or
    set is refused."""
    confirmatory = load_module("result_confirmatory", ROOT / "docs/result_confirmatory.py")
    label = getattr(confirmatory.CIFAR, which_run)
    record = json.loads(confirmatory.NEAR_RECORDS[label].read_text(encoding="utf-8"))
    assert record["run"] == f"{label}-near"  # the copy that was scored: accepted under that name
    for which in (confirmatory.PRIMARY_SET, confirmatory.SECONDARY_SET):
        first, reference = (record["oscr_log_per_seed"][which][a] for a in ("softmax", "entropic"))
        paired = stats.ttest_rel(first, reference)
        low, high = paired.confidence_interval(0.95)
        d = float(np.mean(np.subtract(first, reference)))
        said = confirmatory.cifar_call_said("oscr_log", which, label)
        assert said.startswith(f"{d:+.4f} [{low:+.4f}, {high:+.4f}]".replace("-", "−")), said
        se = math.hypot(d / paired.statistic, record["oscr_log_se_samples"][which]["softmax"])
        half = stats.t.ppf(0.975, len(first) - 1) * se
        with_samples = confirmatory.cifar_call_said("oscr_log", which, label, log_samples=True)
        assert with_samples.startswith(f"{d:+.4f} [{d - half:+.4f}, {d + half:+.4f}]".replace("-", "−")), with_samples
        stored = next(t for t in record["tests"][which]["primary"] if t["row"] == "softmax")
        low, high = stored["interval"]
        linear = confirmatory.cifar_call_said("oscr", which, label)
        assert linear.startswith(f"{stored['difference']:+.4f} [{low:+.4f}, {high:+.4f}]".replace("-", "−"))
    if label == confirmatory.CIFAR.exploratory:
        assert confirmatory.cifar_call_said("oscr_log", label=label).endswith("*worse*")  # what was predicted
    other = tmp_path / "other.json"
    other.write_text(json.dumps(dict(record, run="bench-cifar-b-5-near")))
    monkeypatch.setitem(confirmatory.NEAR_RECORDS, label, other)
    confirmatory.near_record.cache_clear()
    with pytest.raises(ValueError, match="a reading of bench-cifar-b-5-near"):
        confirmatory.cifar_family(label=label)
    confirmatory.near_record.cache_clear()


def test_the_osr_splits_page_says_each_primary_call_of_the_osr_cifar10_5_seed_run(facts_module):
    """Review of 2026-12-05 (m3): ``docs/osr-splits.md`` typed the run's five calls and intervals by hand.
    Each is now read from the JSON: the call is the test's decision, the interval printed is its 95 %
    one and holds its difference, and the count of *better* calls is the family's."""
    osr = facts_module.result_osr_splits
    tests = {t["approach"]: t for t in facts_module.run(osr.OSR10_5)["tests"]["primary"]}
    said = facts_module.facts()
    for approach, test in tests.items():
        text = said[f"osr10_5_{approach.replace('-', '_')}"]
        below = test["decision"] == "not resolved" and test["p_holm"] < ALPHA  # the page's "differs, below margin"
        assert text.startswith(f"*{'differs, below margin' if below else test['decision']}*"), (approach, text)
        if test["decision"] in ("better", "worse"):
            low, high = (float(v.replace("−", "-")) for v in text.split("[")[1].split("]")[0].split(", "))
            assert low == pytest.approx(test["interval"][0], abs=5e-4) and high == pytest.approx(test["interval"][1], abs=5e-4)
            assert low <= test["difference"] <= high
    assert said["osr10_5_better"] == str(sum(t["decision"] == "better" for t in tests.values()))


def test_the_fine_tunes_at_a_budget_with_room_by_hand(facts_module):
    """The 20-epoch rerun of the CIFAR fine-tunes read as declared: each fine-tune's validation accuracy
    minus its own start network's (softmax of the same seed), scipy's paired 90 % interval, its low end
    against minus the run's margin; the converged ones tested against EOS as the run's JSON says, the
    others named untested."""
    room = facts_module.result_room
    result = facts_module.run(room.LABEL)
    softmax = facts_module.paper_row(room.LABEL, "softmax")["accuracy_per_seed"]["val"]
    drops = facts_module.facts()["room_drops"]
    primary = facts_module.facts()["room_primary"]
    for approach in room.FINE_TUNES:
        mine = facts_module.paper_row(room.LABEL, approach)["accuracy_per_seed"]["val"]
        low = stats.ttest_rel(mine, softmax).confidence_interval(0.90).low
        converged = low > -result["accuracy_margin"]
        drop, end = (f"{v:+.4f}".replace("-", "−") for v in (np.mean(np.subtract(mine, softmax)), low))
        said = f"`{approach}` {drop} (90 % low end {end}; "
        assert said + ("kept within" if converged else "lost more than") + " the tolerance" in drops
        tested = [t for t in result["tests"]["primary"] if t["approach"] == approach and t["against"] == "entropic"]
        assert bool(tested) == (converged and np.mean(softmax) >= result["min_accuracy"])
        recipe = result["recipes"][approach]
        mark = " (not the authors' recipe)" if recipe.get("start") and recipe.get("differs") else ""
        if tested:
            said = f"`{approach}`{mark} " + f"{tested[0]['difference']:+.4f} [".replace("-", "−")
            assert said in primary
            assert f"(Holm p {tested[0]['p_holm']:#.2g})" in primary
        else:
            assert f"`{approach}`{mark} *not converged*, untested" in primary


def test_the_20_epoch_networks_beside_the_16_epoch_ones_by_hand(facts_module):
    """The room run's item 4: each 20-epoch mean minus a 16-epoch one of the same seeds with Welch's
    interval, computed here from the variances and the Welch-Satterthwaite degrees of freedom; and the
    per-seed drops of the fine-tunes from their own start networks."""
    room = facts_module.result_room
    table = facts_module.facts()["room_beside_16"]
    for approach, labels in room.BESIDE.items():
        longer = np.asarray(facts_module.paper_row(room.LABEL, approach)["mean_oscr_per_seed"])
        for label in labels:
            shorter = np.asarray(facts_module.paper_row(label, approach)["mean_oscr_per_seed"])
            va, vb = longer.var(ddof=1) / len(longer), shorter.var(ddof=1) / len(shorter)
            dof = (va + vb) ** 2 / (va ** 2 / (len(longer) - 1) + vb ** 2 / (len(shorter) - 1))
            half = stats.t.ppf(0.975, dof) * math.sqrt(va + vb)
            difference = longer.mean() - shorter.mean()
            said = " ".join(f"{v:+.4f}".replace("-", "−") for v in (difference, difference - half))
            assert said.replace(" ", " [", 1) in table
    per_seed = facts_module.facts()["room_drops_per_seed"]
    start = facts_module.paper_row(room.LABEL, "softmax")["accuracy_per_seed"]["val"]
    for approach in room.FINE_TUNES:
        mine = facts_module.paper_row(room.LABEL, approach)["accuracy_per_seed"]["val"]
        for value, drop in zip(mine, np.subtract(mine, start)):
            assert f"{value:.4f} ({drop:+.4f})".replace("-", "−") in per_seed


def test_rank_ranges_read_with_the_seeds_alone_resolve_more(facts_module):
    """Leaving out the validation samples' share can only shrink standard errors, so the seeds alone
    find at least as many 'beats' as the share leaves; on the room run they find more."""
    room = facts_module.result_room
    assert room.rank_beats(False) > room.rank_beats(True) > 0
