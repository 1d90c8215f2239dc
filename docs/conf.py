"""Sphinx configuration of the documentation site (``make docs`` builds it into docs/_build/html).

Everything is local: no page, theme, script or inventory is fetched at build time. Markdown
pages are read by myst-parser; the API, settings, configuration and command-line references are
generated from the code (docs/_ext/agnostophobia_refs.py, autodoc/autosummary, sphinx-argparse);
the gallery runs examples/*.py (sphinx-gallery). Adding a page: a Markdown file in docs/ and
one line in a toctree of index.md.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))  # the package as it is in this checkout
sys.path.insert(0, str(HERE / "_ext"))
os.environ.setdefault("MPLBACKEND", "Agg")

import agnostophobia  # noqa: E402

project = "agnostophobia"
author = "the agnostophobia developers"
copyright = "the agnostophobia developers"
release = version = agnostophobia.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",  # [source] links: each API entry's code, highlighted, on this site
    "sphinx_copybutton",
    "sphinx_design",  # the landing page's cards
    "sphinx.ext.intersphinx",
    "sphinxarg.ext",
    "sphinx_gallery.gen_gallery",
    "agnostophobia_refs",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "gallery/*.py", "gallery/*.ipynb",
                    "gallery/*.zip", "gallery/*.md5", "gallery/*.json"]
templates_path = ["_templates"]

# --- Markdown (myst) --------------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist", "substitution"]
# The overview's numbers from the published runs, computed from their committed benchmark.json: the
# page writes {{ name }} (docs/result_facts.py), so that none of them is typed by hand.
sys.path.insert(0, str(HERE))
from result_facts import facts  # noqa: E402

myst_substitutions = facts()
myst_heading_anchors = 4  # the existing pages link to their sections as GitHub does (#what-is-staged-...)
# No smart quotes or dashes: "--epochs" stays "--epochs" and quotes stay straight wherever text is
# not marked as code (sphinx-argparse puts help text and flags in plain paragraphs), so that what a
# reader copies runs.
smartquotes = False

# --- checks -----------------------------------------------------------------------------------
nitpicky = True
# Type hints name classes of other libraries (torch, numpy, ...). Their inventories are not
# fetched at build time (no network), so references into them cannot be resolved: they are
# accepted by module prefix, and only those. Everything of this package must resolve.
intersphinx_mapping = {}
nitpick_ignore_regex = [
    ("py:.*", r"(torch|numpy|np|scipy|matplotlib|yaml|PIL|sklearn|onnxruntime|argparse|pathlib|typing|collections|"
              r"dataclasses|enum|abc|os|io|concurrent|multiprocessing|threading|contextlib|types|numbers|"
              r"datetime|inspect|logging|tqdm|json|functools|subprocess|signal|random|re|math)(\..*)?"),
    # builtins and typing names as they appear in signatures
    ("py:.*", r"(Any|Callable|Dict|Iterable|Iterator|List|Mapping|MutableMapping|Optional|Sequence|Set|Tuple|Type|Union|"
              r"ClassVar|Literal|NamedTuple|Path|Tensor|ndarray|Module|Generator|TextIO|BinaryIO|PathLike|"
              r"Protocol|TypeVar|Namespace|ArgumentParser|ConfigError|"
              r"int|float|str|bool|bytes|dict|list|tuple|set|frozenset|object|type|None|callable|"
              r"optional|array|array-like|array_like|iterable|mapping|sequence|default|shape|N|C|D|K)"),
    # a quoted forward reference inside a subscript ("Dict[str, 'X']") that autodoc cannot split
    ("py:class", r"'.*"),
    # the registry's type variable (Registry[T]): a name for "any registered object", not a class
    ("py:(class|obj)", r"agnostophobia\.registry\.T"),
]
# Internal helpers that docstrings of the public API name: they are not on the API pages (not in
# any ``__all__``), so the reference cannot resolve; each is listed, nothing else is let through.
_INTERNAL = ("_torch_score _take_settings fitted_state restore_fitted_state scores search_device fit_high "
             "_check_duplicates _Metric WeibullTail TrainedModel ImageFiles FileProtocolSpec FetchedFile "
             "DatasetStatus DISTANCES DETECTORS Setting DataError prepare_images "
             "Training agnostophobia.training.trainer.Training "
             "agnostophobia.data.preprocess.prepare_images agnostophobia.data.inputs.run_input "
             "agnostophobia.data.file_protocols.build_file_protocol agnostophobia.data.fetch.FetchedFile "
             "agnostophobia.data.datasets.DatasetSplit check_resolved KDTREE_MAX_DIM kdtree_smallest "
             "agnostophobia.detectors.mahalanobis._GaussianDetector agnostophobia.detectors.shaping._LastLayerDetector "
             "FPR_SERIES WHITENING_SAMPLES MAX_WORKERS ORIGIN_AXIS_GID BORDER_GID SUBSAMPLE_NOTE_GID "
             "agnostophobia.detectors._base.continue_at_tie Comparison compare_models agnostophobia.deploy.compare.Comparison"
             ).split()
# Submodules that package docstrings name by their short name (``:mod:`oscr```).
_SUBMODULES = ("calibration predict export oscr ood stats summary rows backbones weights resolution significance "
               "run panels features histograms curves style").split()
nitpick_ignore = ([(role, name) for name in _INTERNAL for role in ("py:class", "py:func", "py:meth", "py:data")]
                  + [("py:mod", name) for name in _SUBMODULES])
suppress_warnings = [
    # sphinx-argparse's domain answers no Markdown link lookups; myst asks every domain and warns
    "myst.domains",
]

# --- API ----------------------------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = True

# --- math, offline ------------------------------------------------------------------------------
# MathJax 3 (tex-chtml and its fonts) from the sphinx-mathjax-offline wheel of the [docs] extra,
# copied into _static: pages render formulas without reaching a CDN.
_MATHJAX = Path(importlib.util.find_spec("sphinx-mathjax-offline").origin).parent / "static" / "mathjax"
mathjax_path = "mathjax/tex-chtml.js"


def _copy_mathjax(app, exception):
    if exception is None and app.builder.format == "html":
        target = Path(app.outdir) / "_static" / "mathjax"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(_MATHJAX / "tex-chtml.js", target / "tex-chtml.js")
        shutil.copytree(_MATHJAX / "output" / "chtml" / "fonts", target / "output" / "chtml" / "fonts",
                        dirs_exist_ok=True)


# --- gallery ---
# Every example in examples/ runs at build time, cell by cell, its printed output and figures
# shown under each cell; make_folder_protocol.py (a tool that needs the staged datasets) is
# left out of the gallery.
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "gallery",
    "filename_pattern": r"\.py$",  # all of them, own_images.py included
    "ignore_pattern": r"make_folder_protocol\.py",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "show_memory": False,
    "write_computation_times": False,  # its page loads DataTables from a CDN
    "plot_gallery": "True",
    "within_subsection_order": "FileNameSortKey",
    "reset_modules": ("matplotlib", "agnostophobia_refs.forget_example_registrations"),
    "reset_modules_order": "after",
    # "Examples using X": which examples use which names of the package, recorded while they run;
    # each API entry that an example uses lists those examples (_examples_using, below).
    "doc_module": ("agnostophobia",),
    "backreferences_dir": "gallery/backreferences",
    # each figure also at twice the resolution (sharp on high-density screens); the page's script
    # gallery-full-image.js links each figure to that full-size image
    "image_srcset": ["2x"],
}


def _examples_using(app, what, name, obj, options, lines):
    """Append "Examples using NAME" (sphinx-gallery's mini-gallery) to the API entry of a class or
    function that a gallery example uses; nothing where none does. An object with a page of its
    own (reference/generated/) gets it from its page's template (docs/_templates/autosummary/);
    this is for the registered classes that the registries page documents."""
    if what not in ("class", "function", "exception") or app.env.docname.startswith("reference/generated/"):
        return
    used = HERE / "gallery" / "backreferences" / f"{name}.examples"
    if used.is_file() and used.stat().st_size > 0:
        short = name.rsplit(".", 1)[-1]
        lines.extend(["", f".. minigallery:: {name}", f"   :add-heading: Examples using ``{short}``", ""])

# --- HTML ---------------------------------------------------------------------------------------
# Furo rather than alabaster: Furo is maintained, responsive (at phone width the content comes
# first and the navigation folds into a drawer), has a dark mode, the current page marked in the
# navigation and each page's own contents on the right, and it scrolls wide tables and code
# blocks inside their own box. pytorch-ood, the closest peer, uses it too. It ships its assets in
# the wheel: nothing is fetched when a page is built or opened.
html_theme = "furo"
html_title = f"agnostophobia {release}"
html_static_path = ["_static"]
html_css_files = ["agnostophobia.css"]
html_js_files = ["gallery-full-image.js"]
html_theme_options = {
    "navigation_with_keys": True,
    "top_of_page_buttons": [],  # no "view/edit source" buttons: no repository URL is configured
}
html_show_sourcelink = False  # viewcode's [source] links show the code; the page's Markdown adds nothing
pygments_style = "friendly"
pygments_dark_style = "monokai"

# Copy buttons on code blocks: the prompt ($ , >>> , ...) and the output are left out of the copy.
copybutton_prompt_text = r"\$ |>>> |\.\.\. "
copybutton_prompt_is_regexp = True
copybutton_only_copy_prompt_lines = False
copybutton_exclude = ".linenos, .gp, .go"


def setup(app):
    app.connect("build-finished", _copy_mathjax)
    app.connect("autodoc-process-docstring", _examples_using)
