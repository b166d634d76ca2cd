"""Load BBQ's intersectional subsets from a directory in the official release layout.

Layout (the same names as nyu-mll/BBQ's ``data/`` and ``supplemental/``, flattened)::

    Race_x_SES.jsonl          one item a line
    Race_x_gender.jsonl       one item a line
    additional_metadata.csv   category, question_index, example_id, target_loc, ...

The loader joins ``target_loc`` from the metadata on (category, example_id) and
checks that the two agree: every item has exactly one metadata row with the same
question_index, and every metadata row of the category has an item (a truncated
``.jsonl`` is therefore an error, never a silent partial load). Any fault raises
:class:`~fairness_tests.core.errors.DataError` naming the file and the line.

The items table (one row per item) has the columns :data:`ITEM_COLUMNS`.
``unknown_loc`` is the index of the option tagged ``"unknown"`` (NaN when not
exactly one option is); ``target_loc`` is NaN where the metadata leaves it empty.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from fairness_tests.core.errors import DataError
from fairness_tests.core.io import json_lines, sha256_file

DATASETS = ("Race_x_SES", "Race_x_gender")
METADATA_FILE = "additional_metadata.csv"
FILES = tuple(f"{d}.jsonl" for d in DATASETS) + (METADATA_FILE,)

#: sha256 of the official files at nyu-mll/BBQ commit bea11bd9 (../shared/bbq/README.md)
OFFICIAL_SHA256 = {
    "Race_x_SES.jsonl": "af8e2ae3d0e5be9ebcbfe7149e591d47ff649e263307f4548f7fb12f6a6d83e8",
    "Race_x_gender.jsonl": "e5dbba782f8c4e25b99dd5470b5136e2db73dbf401cf6d4a5a3ed31b02f95696",
    "additional_metadata.csv": "f36708416b0e7adb81b47ad1926f9c39c2beb611702b73b01e06c9b6c9ffbd3d",
}

ITEM_COLUMNS = [
    "dataset", "example_id", "line", "question_index", "polarity", "context",
    "context_text", "question", "ans0", "ans1", "ans2", "label",
    "info_text0", "info_text1", "info_text2", "info_tag0", "info_tag1", "info_tag2",
    "unknown_loc", "target_loc",
]
_REQUIRED = ("example_id", "question_index", "question_polarity", "context_condition",
             "category", "answer_info", "context", "question", "ans0", "ans1", "ans2", "label")
_METADATA_COLUMNS = ("category", "question_index", "example_id", "target_loc")


@dataclass
class BBQData:
    """The loaded items of the requested datasets plus provenance."""
    directory: Path
    items: pd.DataFrame
    sha256: dict[str, str] = field(default_factory=dict)

    @property
    def official(self) -> bool:
        """True when every loaded file's sha256 equals the official release's."""
        return bool(self.sha256) and all(OFFICIAL_SHA256.get(k) == v for k, v in self.sha256.items())

    def provenance(self) -> dict:
        return {"directory": str(self.directory), "sha256": dict(self.sha256),
                "official": self.official}


def load_bbq(directory: str | Path, datasets: tuple[str, ...] = DATASETS,
             require_official: bool = False) -> BBQData:
    """Load and join the given datasets from ``directory`` (see module docstring)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DataError("BBQ data directory not found", path=directory)
    unknown = [d for d in datasets if d not in DATASETS]
    if unknown:
        raise DataError(f"unknown BBQ dataset(s) {unknown}; known: {list(DATASETS)}")
    paths = {d: directory / f"{d}.jsonl" for d in datasets}
    meta_path = directory / METADATA_FILE
    for p in [*paths.values(), meta_path]:
        if not p.is_file():
            raise DataError("missing BBQ file (expected the official layout: "
                            f"{', '.join(FILES)}; `fairness-tests data fetch` downloads it)", path=p)
    sha = {p.name: sha256_file(p) for p in [*paths.values(), meta_path]}
    if require_official:
        for name, digest in sha.items():
            if OFFICIAL_SHA256[name] != digest:
                raise DataError(f"sha256 {digest} is not the official release's "
                                f"{OFFICIAL_SHA256[name]}", path=directory / name)
    metadata = read_metadata(meta_path)
    frames = [join_metadata(read_items(paths[d], d), metadata, meta_path, paths[d])
              for d in datasets]
    items = pd.concat(frames, ignore_index=True)
    return BBQData(directory=directory, items=items, sha256=sha)


def read_items(path: str | Path, dataset: str) -> pd.DataFrame:
    """Items of one ``<dataset>.jsonl`` file, validated (without target_loc)."""
    path = Path(path)
    records, numbers = json_lines(path)
    if not records:
        raise DataError("no items", path=path)
    cols: dict[str, list] = {c: [] for c in ITEM_COLUMNS if c not in ("unknown_loc", "target_loc")}
    for r, no in zip(records, numbers):
        missing = [k for k in _REQUIRED if k not in r]
        if missing:
            raise DataError(f"item lacks field(s) {missing}", path=path, line=int(no))
        info = r["answer_info"]
        try:
            triples = [info[f"ans{k}"] for k in range(3)]
            if not all(isinstance(t, list) and len(t) == 2 and all(isinstance(x, str) for x in t)
                       for t in triples):
                raise TypeError
        except (KeyError, TypeError):
            raise DataError("answer_info must map ans0..ans2 to [text, tag]", path=path,
                            line=int(no), key="answer_info") from None
        eid, label = r["example_id"], r["label"]
        if not isinstance(eid, int) or isinstance(eid, bool):
            raise DataError(f"example_id must be an integer, got {eid!r}", path=path,
                            line=int(no), key="example_id")
        if label not in (0, 1, 2) or isinstance(label, bool):
            raise DataError(f"label must be 0, 1 or 2, got {label!r}", path=path, line=int(no),
                            key="label")
        if r["category"] != dataset:
            raise DataError(f"category {r['category']!r} in the file of {dataset}", path=path,
                            line=int(no), key="category")
        if r["question_polarity"] not in ("neg", "nonneg"):
            raise DataError(f"question_polarity must be neg|nonneg, got {r['question_polarity']!r}",
                            path=path, line=int(no), key="question_polarity")
        if r["context_condition"] not in ("ambig", "disambig"):
            raise DataError("context_condition must be ambig|disambig, got "
                            f"{r['context_condition']!r}", path=path, line=int(no),
                            key="context_condition")
        for k in ("context", "question", "ans0", "ans1", "ans2"):
            if not isinstance(r[k], str):
                raise DataError(f"{k} must be a string", path=path, line=int(no), key=k)
        cols["dataset"].append(dataset)
        cols["example_id"].append(eid)
        cols["line"].append(int(no))
        cols["question_index"].append(str(r["question_index"]))
        cols["polarity"].append(r["question_polarity"])
        cols["context"].append(r["context_condition"])
        cols["context_text"].append(r["context"])
        cols["question"].append(r["question"])
        for k in range(3):
            cols[f"ans{k}"].append(r[f"ans{k}"])
            cols[f"info_text{k}"].append(triples[k][0])
            cols[f"info_tag{k}"].append(triples[k][1])
        cols["label"].append(label)
    df = pd.DataFrame(cols)
    df["example_id"] = df["example_id"].astype(np.int64)
    df["label"] = df["label"].astype(np.int64)
    dup = df["example_id"].duplicated()
    if dup.any():
        row = df[dup].iloc[0]
        raise DataError(f"duplicate example_id {row.example_id}", path=path, line=int(row.line))
    tags = df[["info_tag0", "info_tag1", "info_tag2"]].to_numpy() == "unknown"
    df["unknown_loc"] = np.where(tags.sum(axis=1) == 1, tags.argmax(axis=1), np.nan)
    return df


def read_metadata(path: str | Path) -> pd.DataFrame:
    """``additional_metadata.csv`` (all categories) with its 1-based file line numbers."""
    path = Path(path)
    try:
        meta = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise DataError(f"unreadable CSV ({exc})", path=path) from None
    missing = [c for c in _METADATA_COLUMNS if c not in meta.columns]
    if missing:
        raise DataError(f"missing column(s) {missing}", path=path, line=1)
    meta = meta[list(_METADATA_COLUMNS)].copy()
    meta["line"] = np.arange(len(meta), dtype=np.int64) + 2  # header is line 1
    eid = pd.to_numeric(meta["example_id"], errors="coerce")
    bad = eid.isna() | (eid != eid.round())
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise DataError(f"example_id {meta['example_id'].iat[i]!r} is not an integer", path=path,
                        line=int(meta["line"].iat[i]), key="example_id")
    meta["example_id"] = eid.astype(np.int64)
    tl = meta["target_loc"].str.strip()
    tnum = pd.to_numeric(tl.where(tl != "", None), errors="coerce")
    bad = (tl != "") & ~tnum.isin([0, 1, 2])
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise DataError(f"target_loc {tl.iat[i]!r} is not 0, 1, 2 or empty", path=path,
                        line=int(meta["line"].iat[i]), key="target_loc")
    meta["target_loc"] = tnum.astype(np.float64)
    meta["question_index"] = meta["question_index"].str.strip().str.replace(r"\.0$", "", regex=True)
    return meta


def join_metadata(items: pd.DataFrame, meta: pd.DataFrame, meta_path: Path,
                  items_path: Path) -> pd.DataFrame:
    """Join target_loc onto one dataset's items; any mismatch is a DataError."""
    dataset = items["dataset"].iat[0]
    m = meta[meta["category"] == dataset]
    if m.empty:
        raise DataError(f"no rows for category {dataset!r}", path=meta_path)
    dup = m["example_id"].duplicated()
    if dup.any():
        row = m[dup].iloc[0]
        raise DataError(f"duplicate row for {dataset} example_id {row.example_id}",
                        path=meta_path, line=int(row.line))
    j = items.merge(m[["example_id", "question_index", "target_loc", "line"]],
                    on="example_id", how="outer", suffixes=("", "_meta"), indicator=True)
    only_items = j[j["_merge"] == "left_only"]
    if len(only_items):
        row = only_items.iloc[0]
        raise DataError(f"example_id {row.example_id} has no row in {meta_path.name} "
                        f"({len(only_items)} such items)", path=items_path, line=int(row.line))
    only_meta = j[j["_merge"] == "right_only"]
    if len(only_meta):
        row = only_meta.iloc[0]
        raise DataError(f"{dataset} example_id {row.example_id} is missing from "
                        f"{items_path.name} ({len(only_meta)} metadata rows without an item: "
                        "truncated or mismatched file?)", path=meta_path, line=int(row.line_meta))
    bad = j["question_index"] != j["question_index_meta"]
    if bad.any():
        row = j[bad].iloc[0]
        raise DataError(f"{dataset} example_id {row.example_id}: question_index "
                        f"{row.question_index_meta!r} but the item has {row.question_index!r}",
                        path=meta_path, line=int(row.line_meta))
    j = j.sort_values("line", kind="stable").reset_index(drop=True)
    j["line"] = j["line"].astype(np.int64)
    return j[ITEM_COLUMNS]
