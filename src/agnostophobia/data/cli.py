"""``agnostophobia data {list,fetch,check}``.

The parsers import nothing of the data layer (``--help`` answers without numpy); each command
imports what it runs."""
from __future__ import annotations

import json
import sys


def add_commands(subparsers) -> None:
    parser = subparsers.add_parser("data", help="list, fetch and check the datasets",
                                   description="Datasets of the paper: list, fetch, check.")
    sub = parser.add_subparsers(dest="data_command", metavar="ACTION")
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])

    def data_dir_option(p):
        p.add_argument("--data-dir", metavar="D", default=None,
                       help="data directory (default: $AGNOSTOPHOBIA_DATA, else ~/.cache/agnostophobia/data)")

    p = sub.add_parser("list", help="registered datasets, their sources and checksums")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("fetch", help="download official files (checksum-verified, atomic)")
    p.add_argument("names", nargs="+", metavar="NAME", help="dataset(s), as 'agnostophobia data list' names them")
    data_dir_option(p)
    p.add_argument("--allow-unverified", action="store_true",
                   help="download files without a published checksum and record their sha256")
    p.add_argument("--mirror", metavar="URL", default=None,
                   help="fetch MIRROR/<filename> instead of the official URLs ($AGNOSTOPHOBIA_MIRROR)")
    p.add_argument("--force", action="store_true", help="download even if a prepared .npz is present")
    p.set_defaults(func=cmd_fetch)

    p = sub.add_parser("check", help="where each dataset is, counts, label histograms; exit 1 on a broken file")
    p.add_argument("names", nargs="*", metavar="NAME", help="dataset(s) (default: all; then missing ones "
                                                             "are reported but only broken files fail)")
    data_dir_option(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_check)


def cmd_list(args) -> int:
    from agnostophobia.data.datasets import DATASETS

    rows = {}
    for name in DATASETS.names():
        info = DATASETS.get(name)
        rows[name] = {"title": info.title, "directory": info.directory, "splits": list(info.splits),
                      "num_classes": info.num_classes, "labels": info.label_convention,
                      "npz_layout": info.npz_layout, "official_layout": info.official_layout,
                      "fetch_as": info.fetch_as, "optional": info.optional, "notes": list(info.notes),
                      "resources": [{"filename": r.filename, "urls": list(r.urls), "md5": r.md5,
                                     "sha256": r.sha256, "size": r.size, "checksum": r.checksum_source}
                                    for r in info.resources]}
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for name, row in rows.items():
        print(f"{name:22s} {row['title']}")
        for r in row["resources"]:
            check = f"md5 {r['md5']}" if r["md5"] else f"sha256 {r['sha256']}" if r["sha256"] else "NO CHECKSUM"
            print(f"    {r['filename']}  {check}  {r['urls'][0]}")
        if row["fetch_as"]:
            print(f"    (fetch fetches {row['fetch_as']})")
        elif not row["resources"]:
            print("    (no official download)")
    return 0


def cmd_fetch(args) -> int:
    from agnostophobia.data.fetch import Downloader, fetch
    from agnostophobia.data.paths import data_dir as resolve_data_dir

    root = resolve_data_dir(args.data_dir)
    downloader = Downloader(mirror=args.mirror, allow_unverified=args.allow_unverified,
                            log=lambda msg: print(msg, file=sys.stderr))
    fetch(args.names, data_dir=root, downloader=downloader, force=args.force)
    return 0


def cmd_check(args) -> int:
    from agnostophobia.data.check import check, format_report

    report = check(args.names, args.data_dir)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    for message in report["failures"]:  # one line each, no traceback
        print(f"agnostophobia: error: {message}", file=sys.stderr)
    return 0 if report["ok"] else 1
