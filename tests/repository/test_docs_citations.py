"""The site links out as a reader comparing methods expects (issue 57, item 4): the paper on the
landing page and on every page that cites it, each method's paper where the method is listed, and
a "How to cite" section on the landing page that says what CITATION.cff says."""
from __future__ import annotations

import re

import pytest
import yaml
from repo_paths import REPO

DOCS = REPO / "docs"
PAPER = "https://arxiv.org/abs/1811.04110"

#: pages built on the paper: its experiments, data, protocols, losses and baselines
CITING_PAGES = ["docs/index.md", "docs/references.md", "docs/glossary.md", "docs/cifar.md", "docs/data.md",
                "docs/own-images.md", "docs/training-peers.md", "docs/post-processors.md", "docs/guide/reproducing.md",
                "docs/guide/results.md", "docs/guide/benchmark.md", "docs/guide/detectors.md", "docs/guide/your-data.md",
                "docs/guide/scaling.md"]

#: arXiv abstract pages of the methods, and the pages that list the methods
ARXIV = {
    "OpenMax": "1511.06233", "Outlier Exposure": "1812.04606", "energy": "2010.03759", "MixOE": "2108.06805",
    "LogitNorm": "2205.09310", "VOS": "2202.01197", "ReAct": "2111.12797", "ASH": "2209.09858",
    "SCALE": "2310.00227", "k-NN": "2204.06507", "Mahalanobis": "1807.03888", "ViM": "2203.10807",
    "EVM": "1506.06112", "max-logit": "1911.11132",
}
LISTED = {
    "docs/training-peers.md": ["Outlier Exposure", "energy", "MixOE", "LogitNorm", "VOS"],
    "docs/post-processors.md": ["ViM", "Mahalanobis", "ReAct", "ASH", "SCALE"],
    "docs/guide/detectors.md": ["OpenMax", "EVM", "energy", "max-logit", "k-NN", "Mahalanobis", "ViM", "ReAct",
                                "ASH", "SCALE"],
    "docs/references.md": ["Outlier Exposure", "energy", "MixOE", "LogitNorm", "VOS"],
}


def read(name: str) -> str:
    return (REPO / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", CITING_PAGES)
def test_a_page_that_cites_the_paper_links_it(name):
    assert f"]({PAPER})" in read(name)


def test_every_user_page_that_names_the_paper_links_it():
    """A page naming the paper by its title or first author links its arXiv page too."""
    records = {"provenance", "development", "changelog"}  # the record pages (their stems)
    naming = [p.relative_to(REPO).as_posix() for p in sorted(DOCS.rglob("*.md"))
              if not p.relative_to(DOCS).as_posix().startswith(("_build/", "gallery/", "reference/generated/", "gpu-runs/"))
              and p.stem not in records and re.search(r"Reducing Network Agnostophobia|Dhamija", p.read_text(encoding="utf-8"))]
    assert "docs/index.md" in naming
    assert [name for name in naming if f"]({PAPER})" not in read(name)] == []


@pytest.mark.parametrize("name", sorted(LISTED))
def test_each_listed_method_links_its_paper(name):
    text = read(name)
    assert [method for method in LISTED[name] if f"](https://arxiv.org/abs/{ARXIV[method]})" not in text] == []


def test_the_landing_page_says_how_to_cite_as_the_citation_file_does():
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    index = read("docs/index.md")
    section = index.split("\n## How to cite\n", 1)[1].split("\n## ", 1)[0].split("```{toctree}", 1)[0]
    bibtex = section.split("```bibtex\n", 1)[1].split("```", 1)[0]
    paper = citation["preferred-citation"]
    assert f"title     = {{{paper['title']}}}" in bibtex
    assert "Dhamija, Akshay Raj and G{\\\"u}nther, Manuel and Boult, Terrance E." in bibtex
    assert f"year      = {{{paper['year']}}}" in bibtex and f"url       = {{{paper['url']}}}" in bibtex
    assert f"title   = {{{citation['title']}}}" in bibtex
    assert f"version = {{{citation['version']}}}" in bibtex  # CITATION.cff's version is pyproject's (test_docs_site)
    assert f"license = {{{citation['license']}}}" in bibtex
