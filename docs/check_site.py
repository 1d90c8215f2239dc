"""The built site read in a real browser: every page of docs/_build/html in headless Chromium.

Run after ``make docs`` (``.ci/run`` does)::

    python docs/check_site.py                    # every page at 1400 and 400 px; exit 1 on a finding
    python docs/check_site.py --screenshots DIR index.html reference/config.html ...

Each page is opened at each width and fails the check when

- its body is wider than the window (``document.documentElement.scrollWidth`` beyond the
  viewport): a table, code block, formula or word that pushes the page sideways instead of
  scrolling in its own box;
- a code element (``code``, ``pre``, ``kbd``, a signature) shows an en or em dash before a word,
  where ``--flag`` was written and a smart-quote pass turned it into ``–flag`` (in the text
  outside code too: a dash right after a space and before a word);
- it shows a raw ``Setting(type=...)`` repr (a declaration printed instead of rendered as a table);
- (read from the files, once) an internal link points to a page or an anchor that does not exist;
- (read from the files) a gallery example shows no figure of its own, so that its thumbnail is
  sphinx-gallery's placeholder;
- (at 1400 px, with every collapsed section opened) a table or a code block scrolls sideways
  inside its own box (the box's ``scrollWidth`` beyond its ``clientWidth`` + 1: for a table the
  nearest ancestor that scrolls or clips, Furo's ``.table-wrapper``; for a code block its
  ``pre``), so that a column or the end of a line is cut off. A wide data table is allowed to scroll when its first column stays in place:
  Markdown puts such a table in a ``:::{container} sticky-first`` block, whose CSS
  (docs/_static/agnostophobia.css) makes the first column ``position: sticky``; the check reads
  the first cell's computed ``position`` rather than the class, so it passes exactly the tables
  whose first column really stays;
- (read from the files) the navigation of the landing page links an internal page
  (``INTERNAL_PAGES``: records for the developers, such as a GPU check's log);
- (read from the files) the landing page does not link the paper (``PAPER_URL``);
- (read from the files) a public function or class on an API page (under ``reference/``;
  exceptions aside) has no Examples section in its own docstring (napoleon's ``Examples``
  rubric; a method's does not count for its class), counted once however many pages show it;
  the functions ``tests/repository/test_docs_returns.py`` lists in its ``NOT_YET`` (counted there,
  and printed here) are not findings twice;
- (read from the files) an entry of an API page's Parameters list gives a name and a type and no
  description (napoleon writes ``name (type) -- description``);
- (at 1400 px, collapsed sections closed) a result page (``RESULT_PAGES``) is taller than
  ``MAX_RESULT_HEIGHT`` px: its answer comes first and the long tables are collapsed.

Needs Debian's ``chromium`` and ``chromium-driver`` and the Python package ``selenium`` (its
version in constraints.txt); the driver is the system's ``chromedriver``, so nothing is fetched.
Not a pytest test: the normal suite runs without a browser and without a built site.
"""
from __future__ import annotations

import argparse
import html.parser
import posixpath
import re
import shutil
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

HTML = Path(__file__).resolve().parent / "_build" / "html"
WIDTHS = (1400, 400)
HEIGHT = 900

# An en/em dash right before a letter, at the start or after a space or bracket: "–epochs" where
# "--epochs" was written (a smart-quote pass). "Tables 1–2" (between digits) and a minus sign in a
# formula ("relu(−x)") are left alone.
RAW_SETTING = "Setting(type="  # the start of a declaration's repr

# The pages that report results of runs (long tables of numbers), and the height, at 1400 px with
# the collapsed sections closed, a reader scrolls through at most.
# The generated result pages are result_pages.py's (read from there: one declaration of them).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from result_pages import PAGES  # noqa: E402  (this folder's module, found through the line above)

RESULT_PAGES = (*(str(Path(entry.page).with_suffix(".html")) for entry in PAGES.values()),
                "guide/benchmark.html", "guide/results.html", "guide/scaling.html", "cifar.html",
                "training-peers.html", "osr-splits.html")
MAX_RESULT_HEIGHT = 12000

MEASURE = r"""
const done = arguments[arguments.length - 1];
const measure = () => {
  const doc = document.documentElement;
  const wide = [];
  if (doc.scrollWidth > doc.clientWidth) {
    for (const el of document.querySelectorAll('body *')) {
      const r = el.getBoundingClientRect();
      if (r.width > 0 && r.right > doc.clientWidth + 1 && getComputedStyle(el).position !== 'fixed') {
        let inside = false;  // inside a box that scrolls on its own: not the page's problem
        for (let p = el.parentElement; p; p = p.parentElement) {
          const o = getComputedStyle(p).overflowX;
          if (o === 'auto' || o === 'scroll' || o === 'hidden') { inside = true; break; }
        }
        if (!inside) { wide.push(el.tagName.toLowerCase() + (el.className ? '.' + String(el.className).split(' ')[0] : '')
                                + ' ' + Math.round(r.right) + 'px'); }
        if (wide.length >= 3) break;
      }
    }
  }
  const dashes = [];
  for (const el of document.querySelectorAll('code, pre, kbd, samp, .sig, tt')) {
    const text = el.textContent;
    if (/(?:^|[\s\[("'=,])[\u2013\u2014][A-Za-z]/.test(text)) {
      dashes.push(text.trim().slice(0, 60));
    }
  }
  const body = document.body.innerText;
  // outside code too: a flag in plain text (sphinx-argparse's help) read as a dash and a word
  for (const m of body.matchAll(/(?:^|\s)[\u2013\u2014][a-z][a-z-]*/g)) { dashes.push(m[0].trim()); }
  const height = doc.scrollHeight;  // collapsed sections still closed
  // open every collapsed section (<details>: a dropdown) and read each table's and code block's box
  for (const d of document.querySelectorAll('details')) { d.open = true; }
  requestAnimationFrame(() => {
    const scrolling = {tables: [], code: []};
    const label = (el) => {
      const h = el.closest('section') ? el.closest('section').querySelector('h1, h2, h3, h4') : null;
      return (h ? h.textContent.replace(/[\u00b6#]/g, '').trim().slice(0, 50) : '?');
    };
    for (const table of document.querySelectorAll('article table')) {
      if (table.closest('pre, .highlight')) continue;  // a code block's line numbers
      // its box: the nearest ancestor that scrolls or clips (Furo's .table-wrapper); a table in no
      // such box (the general index's) overflows onto the page, which the width check reads
      let box = table.parentElement;
      while (box && !['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(box).overflowX)) { box = box.parentElement; }
      if (!box || box === document.body || box === doc) continue;
      if (box.scrollWidth <= box.clientWidth + 1) continue;
      const first = table.querySelector('tr > td:first-child, tr > th:first-child');
      if (first && getComputedStyle(first).position === 'sticky') continue;  // a data table, first column fixed
      scrolling.tables.push(`table under "${label(table)}" ${box.scrollWidth - box.clientWidth} px too wide`);
    }
    for (const pre of document.querySelectorAll('article pre')) {
      if (pre.scrollWidth <= pre.clientWidth + 1) continue;
      scrolling.code.push(`code under "${label(pre)}" ${pre.scrollWidth - pre.clientWidth} px too wide: `
                          + pre.textContent.trim().split('\n')[0].slice(0, 40));
    }
    done({scroll: doc.scrollWidth, client: doc.clientWidth, wide: wide, dashes: dashes,
          raw: (body.match(/Setting\(type=/g) || []).length, height: height, scrolling: scrolling});
  });
};
// measure once the fonts and the formulas are laid out (MathJax typesets after the load)
const ready = (window.MathJax && MathJax.startup && MathJax.startup.promise) ? MathJax.startup.promise : Promise.resolve();
Promise.race([ready, new Promise(r => setTimeout(r, 4000))])
  .then(() => document.fonts ? document.fonts.ready : null)
  .then(() => requestAnimationFrame(() => measure()));
"""


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set = set()
        self.hrefs: list = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])


def pages(root: Path) -> list:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html"))


def broken_links(root: Path, names: list) -> list:
    """Internal links (relative hrefs) whose page or ``#anchor`` is missing."""
    parsed = {}
    for name in names:
        parser = _Links()
        parser.feed((root / name).read_text(encoding="utf-8"))
        parsed[name] = parser
    broken = []
    for name, parser in parsed.items():
        for href in parser.hrefs:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:", "data:")):
                if parts.scheme == "mailto":
                    broken.append(f"{name}: a mailto link {href!r} (text that was meant literally?)")
                continue
            target = posixpath.normpath(posixpath.join(posixpath.dirname(name), unquote(parts.path))) if parts.path else name
            if target.endswith("/") or (root / target).is_dir():
                target = posixpath.join(target, "index.html")
            if not (root / target).exists():
                broken.append(f"{name}: {href} (no file {target})")
                continue
            anchor = unquote(parts.fragment)
            if anchor and target.endswith(".html") and target in parsed and anchor not in parsed[target].ids:
                broken.append(f"{name}: {href} (no anchor #{anchor} in {target})")
    return broken


def placeholder_thumbnails(root: Path) -> list:
    """Gallery pages without a figure the example drew (``sphx_glr_<example>_001.png`` ...):
    sphinx-gallery then gives the example its placeholder thumbnail."""
    return [f"gallery/{page.name}: no figure, a placeholder thumbnail"
            for page in sorted((root / "gallery").glob("*.html"))
            if page.name != "index.html" and f"sphx_glr_{page.stem}_0" not in page.read_text(encoding="utf-8")]


# ------------------------------------------------------------------ read from the files (no browser)
# Pages under these prefixes are records for the project's developers (e.g. a GPU check's log),
# reachable by link, never from the user's navigation.
INTERNAL_PAGES = ("gpu-runs/",)
# The paper the project implements: the landing page links it.
PAPER_URL = "https://arxiv.org/abs/1811.04110"
_PARAMETERS = re.compile(r'<dt class="field-\w+">Parameters<span class="colon">:</span></dt>\s*'
                         r'<dd class="field-\w+">(.*?)</dd>', re.S)
_ENTRY_ID = re.compile(r'<dt class="sig sig-object py" id="([^"]+)"')


def _text(fragment: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", fragment))).strip()


def internal_in_navigation(root: Path) -> list:
    """Links of the landing page's navigation (Furo's ``sidebar-tree``) to an internal page."""
    text = (root / "index.html").read_text(encoding="utf-8")
    start = text.find('class="sidebar-tree"')
    if start < 0:
        return ["index.html: no navigation (sidebar-tree) found"]
    end = text.find("<main", start)
    hrefs = re.findall(r'href="([^"#]*)', text[start:end if end > 0 else None])
    return [f"index.html navigation: {href}" for href in hrefs if href.startswith(INTERNAL_PAGES)]


def paper_link_missing(root: Path) -> list:
    """The landing page without a link to the paper (:data:`PAPER_URL`)."""
    text = (root / "index.html").read_text(encoding="utf-8")
    return [] if f'href="{PAPER_URL}"' in text else [f"index.html: no link to {PAPER_URL}"]


class _Entries(html.parser.HTMLParser):
    """Each documented function and class of an API page, and whether its own docstring (not a
    method's inside it) shows an Examples section (napoleon's ``rubric``)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list = []      # (kind, id or None) of each open <dl>
        self.examples: dict = {}   # id -> has Examples
        self.rubric = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "dl":
            kind = (attrs.get("class") or "").split()
            self.stack.append([kind[1] if kind[:1] == ["py"] and len(kind) > 1 else None, None])
        elif tag == "dt" and self.stack and self.stack[-1][0] and self.stack[-1][1] is None and attrs.get("id"):
            self.stack[-1][1] = attrs["id"]
            if self.stack[-1][0] in ("function", "class"):
                self.examples.setdefault(attrs["id"], False)
        elif tag == "p" and "rubric" in (attrs.get("class") or "").split():
            self.rubric = True

    def handle_endtag(self, tag):
        if tag == "dl" and self.stack:
            self.stack.pop()
        elif tag == "p":
            self.rubric = False

    def handle_data(self, data):
        if self.rubric and data.strip() == "Examples":
            owner = next((entry for entry in reversed(self.stack) if entry[0]), None)
            if owner and owner[0] in ("function", "class") and owner[1]:
                self.examples[owner[1]] = True


def api_pages(root: Path) -> list:
    return sorted(p for p in (root / "reference").rglob("*.html")) if (root / "reference").is_dir() else []


# The source test that lists, and counts, the functions still without an example (its NOT_YET);
# read, not repeated here, so that the site and the source agree on the gaps.
EXAMPLE_GAPS = Path(__file__).resolve().parent.parent / "tests" / "repository" / "test_docs_returns.py"


def listed_example_gaps(path: Path = EXAMPLE_GAPS) -> tuple:
    """The names ``NOT_YET["examples"]`` of ``path`` lists (empty where the file is absent)."""
    import ast

    if not path.is_file():
        return ()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and "NOT_YET" in ast.unparse(
                node.targets[0] if isinstance(node, ast.Assign) else node.target):
            return tuple(ast.literal_eval(node.value).get("examples", ()))
    return ()


def api_without_examples(root: Path, listed: tuple = ()) -> list:
    """Public functions and classes (exceptions aside: raised, not made) of the API pages whose
    docstring has no Examples section, except those ``listed`` (the source test's counted gaps);
    an object documented on several pages counts once."""
    examples: dict = {}
    for page in api_pages(root):
        parser = _Entries()
        parser.feed(page.read_text(encoding="utf-8"))
        for name, has in parser.examples.items():
            examples[name] = examples.get(name, False) or has
    return sorted(name for name, has in examples.items() if not has and name not in listed)


def parameters_without_description(root: Path) -> list:
    """Entries of an API page's Parameters lists that give a name (and a type) and no description
    (napoleon writes ``name (type) -- description``)."""
    found = set()
    for page in api_pages(root):
        text = page.read_text(encoding="utf-8")
        for block in _PARAMETERS.finditer(text):
            owners = _ENTRY_ID.findall(text[:block.start()])
            owner = owners[-1] if owners else page.name
            items = re.findall(r"<li>(.*?)</li>", block.group(1), re.S) or [block.group(1)]
            for item in items:
                entry = _text(item)
                if entry and " -- " not in entry and " – " not in entry:
                    found.add(f"{owner}: {entry}")
    return sorted(found)


def driver(chromedriver: str, chromium: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--hide-scrollbars", f"--window-size={WIDTHS[0]},{HEIGHT}", "--force-device-scale-factor=1"):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    browser.set_script_timeout(20)
    browser.set_page_load_timeout(30)
    return browser


def set_width(browser, width: int, height: int = HEIGHT) -> None:
    # the viewport itself, exactly (a window's outer size differs between modes)
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})


def check(root: Path, browser, names: list, widths=WIDTHS) -> dict:
    findings = {"wide": {w: [] for w in widths}, "dashes": [], "raw": [], "tables": [], "code": [],
                "tall": []}
    for width in widths:
        set_width(browser, width)
        for name in names:
            browser.get((root / name).resolve().as_uri())
            m = browser.execute_async_script(MEASURE)
            if m["scroll"] > m["client"]:
                findings["wide"][width].append(f"{name}: {m['scroll']} px > {m['client']} px ({'; '.join(m['wide'])})")
            if width == widths[0]:
                findings["dashes"] += [f"{name}: {text!r}" for text in m["dashes"]]
                if m["raw"]:
                    findings["raw"].append(f"{name}: {m['raw']} x {RAW_SETTING!r}")
                findings["tables"] += [f"{name}: {line}" for line in m["scrolling"]["tables"]]
                findings["code"] += [f"{name}: {line}" for line in m["scrolling"]["code"]]
                if name in RESULT_PAGES and m["height"] > MAX_RESULT_HEIGHT:
                    findings["tall"].append(f"{name}: {m['height']} px")
    return findings


def screenshots(root: Path, browser, names: list, out: Path, widths=WIDTHS, height: int = HEIGHT) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for width in widths:
        set_width(browser, width, height)
        for name in names:
            path, _, anchor = name.partition("#")
            browser.get((root / path).resolve().as_uri() + (f"#{anchor}" if anchor else ""))
            browser.execute_async_script(MEASURE)
            shot = out / f"{re.sub(r'[^A-Za-z0-9]+', '_', name)}-{width}.png"
            browser.save_screenshot(str(shot))
            print(shot)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--html", type=Path, default=HTML, help="the built site (default: docs/_build/html)")
    p.add_argument("--chromedriver", default=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    p.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    p.add_argument("--screenshots", type=Path, metavar="DIR",
                   help="only take screenshots of the PAGES (relative to --html) at each width into DIR")
    p.add_argument("--height", type=int, default=HEIGHT, help="screenshot height in px")
    p.add_argument("pages", nargs="*", help="pages relative to --html (default: every page)")
    args = p.parse_args(argv)
    root = args.html.resolve()
    if not (root / "index.html").is_file():
        print(f"no built site at {root}: run `make docs` first", file=sys.stderr)
        return 2
    names = args.pages or pages(root)
    start = time.monotonic()
    browser = driver(args.chromedriver, args.chromium)
    try:
        if args.screenshots:
            screenshots(root, browser, names, args.screenshots, height=args.height)
            return 0
        findings = check(root, browser, names)
    finally:
        browser.quit()
    broken = broken_links(root, pages(root))
    failed = False
    for width, wide in findings["wide"].items():
        print(f"pages wider than the window at {width} px: {len(wide)}")
        failed |= bool(wide)
        for line in wide:
            print("  " + line)
    for label, items in (("code elements with an en/em dash before a word", findings["dashes"]),
                         (f"pages showing a raw {RAW_SETTING!r} repr", findings["raw"]),
                         (f"tables scrolling sideways in their box at {WIDTHS[0]} px", findings["tables"]),
                         (f"code blocks scrolling sideways in their box at {WIDTHS[0]} px", findings["code"]),
                         (f"result pages taller than {MAX_RESULT_HEIGHT} px at {WIDTHS[0]} px", findings["tall"]),
                         ("broken internal links or anchors", broken),
                         ("gallery examples with a placeholder thumbnail", placeholder_thumbnails(root)),
                         ("internal pages in the navigation", internal_in_navigation(root)),
                         ("the paper's link missing from the landing page", paper_link_missing(root)),
                         ("API functions and classes without an Examples section (besides the "
                          f"{len(listed_example_gaps())} the source test lists as not yet)",
                          api_without_examples(root, listed_example_gaps())),
                         ("API parameters without a description", parameters_without_description(root))):
        print(f"{label}: {len(items)}")
        failed |= bool(items)
        for line in items:
            print("  " + line)
    print(f"{len(names)} pages at {', '.join(f'{w} px' for w in WIDTHS)} in {time.monotonic() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
