"""``type: folders``: ``ROOT/<split>/<class>/<image>``, each class folder named known, negative or
unknown in the mapping, listed with every problem found (:func:`_list_folders`)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

from agnostophobia._reading import walk_files
from agnostophobia.data.file_protocols.roots import did_you_mean
from agnostophobia.data.file_protocols.spec import NEGATIVE, SPLITS, UNKNOWN, FileProtocolSpec, Item, Listing


def _list_folders(spec: FileProtocolSpec) -> Listing:
    known, negative = sorted(set(spec.known)), sorted(set(spec.negative))
    roles = {**{c: UNKNOWN for c in spec.unknown}, **{c: NEGATIVE for c in negative},
             **{c: i for i, c in enumerate(known)}}
    problems = _overlaps(spec)
    splits = {split: _list_split_folder(spec.root / split, split, roles, problems) for split in SPLITS}
    for split, classes, what in (("train", known, "known"), ("train", negative, "negative"),
                                 ("test", spec.unknown, "unknown")):
        present = {item.path.relative_to(spec.root / split).parts[0] for item in splits[split]}
        if (spec.root / split).is_dir():  # (a missing split folder is one problem, not one per class)
            problems += [f"{spec.root / split / c}: {what} class has no {split} images (no such folder)"
                         f"{did_you_mean(c, spec.root / split)}"
                         for c in classes if c not in present and not (spec.root / split / c).is_dir()]
    return Listing(splits, known, negative, problems)


def _overlaps(spec: FileProtocolSpec) -> List[str]:
    lists = {"known": spec.known, "negative": spec.negative, "unknown": spec.unknown}
    problems = []
    for i, a in enumerate(lists):
        for b in list(lists)[i + 1:]:
            problems += [f"class {c!r} is listed as both {a} and {b}" for c in sorted(set(lists[a]) & set(lists[b]))]
    return problems


def _list_split_folder(folder: Path, split: str, roles: Dict[str, int], problems: List[str]) -> List[Item]:
    if not folder.is_dir():
        problems.append(f"{folder}: missing {split} folder (expected ROOT/{split}/<class>/<image>)")
        return []
    items = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue  # .DS_Store and the like
        if not entry.is_dir():
            problems.append(f"{entry}: a file outside any class folder")
        elif entry.name not in roles:
            problems.append(f"{entry}: class folder listed in none of known, negative, unknown")
        elif roles[entry.name] == UNKNOWN and split != "test":
            problems.append(f"{entry}: unknown class in the {split} split; unknowns (D_a) are test only")
        else:
            # a link to nothing (dangling, or a loop), a FIFO, socket or device is listed too:
            # reading it is a problem, not a skip
            files = sorted(Path(folder, name) for folder, names in walk_files(entry) for name in names
                           if not name.startswith("."))
            if not files:
                problems.append(f"{entry}: empty class folder")
            source = entry.name if roles[entry.name] == NEGATIVE else None
            items += [Item(p, roles[entry.name], source, str(p)) for p in files]
    return items
