"""Sub-command ``plot``: the paper's figures from a run's stored outputs."""
from __future__ import annotations

from pathlib import Path


def add_commands(subparsers) -> None:
    p = subparsers.add_parser(
        "plot", help="draw the paper's figures (deep features, histograms, OSCR) from a run",
        description="Draw deep-feature plots, softmax-score and feature-magnitude histograms and OSCR "
                    "curves (paper Figs. 1, 2 and supplementary) from RUN/seed*/<approach>/outputs.npz, "
                    "without retraining.")
    p.add_argument("run", type=Path, help="run directory written by train or reproduce")
    p.add_argument("--format", dest="formats", nargs="+", default=["png"], metavar="FMT",
                   help="one or more of png (default), pdf, svg")
    p.add_argument("--out", type=Path, help="output directory (default: RUN/figures)")
    p.add_argument("--max-points", type=int, default=None,
                   help="deep-feature plots show at most this many knowns and unknowns (default 5000)")
    p.set_defaults(func=_plot)


def _plot(args) -> int:
    from agnostophobia._runlock import run_read_lock
    from agnostophobia.plotting.request import PlotRequest
    from agnostophobia.plotting.run import check_formats, check_run_records, draw_run

    if args.max_points is not None and args.max_points < 1:
        raise ValueError(f"--max-points must be >= 1, got {args.max_points}")
    check_formats(args.formats)  # bad flags are refused before the run is touched
    with run_read_lock(args.run):  # figures are not drawn while training rewrites the outputs; a reader writes nothing
        check_run_records(args.run)  # a run whose records are broken or disagree stops before anything is written
        request = PlotRequest.from_args(args)
        sections, written = draw_run(request)
    out = request.out_dir
    if not written:
        print(f"no figures drawn for {args.run} (see the messages above)")
        return 0
    figures = sum(len(paths) for paths in sections.values())
    kinds = ", ".join(dict.fromkeys(p.suffix[1:] for p in written))
    print(f"wrote {len(written)} file(s) ({figures} figures x {kinds}) to {out}")
    for title, paths in sections.items():
        print(f"  {title}: {', '.join(Path(p).name for p in paths)}")
    return 0
