"""Load BBQ categories from a directory in either layout, with ``target_loc``.

Two layouts are read (per file, the first that exists)::

    <dir>/data/<Category>.jsonl                 the BBQ repository's layout
    <dir>/supplemental/additional_metadata.csv  (also analysis_scripts/)
    <dir>/<Category>.jsonl                      flat
    <dir>/additional_metadata.csv

``target_loc`` (the stereotype-consistent option, polarity-corrected) and
``label_type`` come from the official metadata file when it has rows for the
category: the loader joins them on (category, example_id) and checks that the two
agree (every item has a metadata row with the same question_index, every metadata
row of the category has an item: a truncated ``.jsonl`` is an error, never a silent
partial load). When the file is absent, or has no row for a category, both are
derived from each item by the BBQ authors' own rule
(:mod:`fairness_tests.benchmarks.bbq.authors`), and :attr:`BBQData.target_loc` says so
per category. Any fault raises :class:`~fairness_tests.core.errors.DataError` naming
the file and the line; a missing directory or file is one line naming
``fairness-tests data fetch`` and ``$FAIRNESS_BBQ_DIR``.

The items table (one row per item) has the columns :data:`ITEM_COLUMNS`.
``unknown_loc`` is the index of the option tagged ``"unknown"`` (NaN when not
exactly one option is); ``target_loc`` is NaN where the metadata leaves it empty (or
the authors' rule finds none); ``label_type`` is ``name`` (the people are named) or
``label`` (they are described).
"""
from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from fairness_tests.benchmarks.bbq import authors
from fairness_tests.benchmarks.bbq.filter import filter_items
from fairness_tests.benchmarks.bbq.official import (
    DEFAULT_CATEGORIES,
    INTERSECTIONAL,
    METADATA_FILE,
    OFFICIAL_SHA256,  # noqa: F401  (re-exported: the loader's official sha256)
    ReleaseStatus,
    digests,
    file_name,
    release_status,
    resolve_categories,
    verify,
)
from fairness_tests.core.cache import cached, code_digest
from fairness_tests.core.errors import DataError
from fairness_tests.core.io import json_lines
from fairness_tests.core.paths import DATA_DIR, display_path, shared_dir

ENV_BBQ_DIR = "FAIRNESS_BBQ_DIR"


def bbq_dir(explicit: str | os.PathLike | None = None) -> Path:
    """The BBQ data directory: explicit argument, ``$FAIRNESS_BBQ_DIR``, or ``<shared>/bbq``."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(ENV_BBQ_DIR)
    return Path(env) if env else shared_dir() / "bbq"

#: the categories loaded when none are named (the intersectional audit)
DATASETS = DEFAULT_CATEGORIES
#: where the metadata file may sit, first found wins
METADATA_PLACES = (f"supplemental/{METADATA_FILE}", METADATA_FILE,
                   f"analysis_scripts/{METADATA_FILE}")
FROM_METADATA = "metadata"
DERIVED = "derived"
#: what BBQData.target_loc values mean (run metadata and card)
TARGET_SOURCES = {
    FROM_METADATA: "joined from the official additional_metadata.csv",
    DERIVED: "derived from each item by the BBQ authors' rule (analysis_scripts/"
             "BBQ_results_metadata.R): no additional_metadata.csv rows for the category",
}

ITEM_COLUMNS = [
    "dataset", "example_id", "line", "question_index", "polarity", "context",
    "context_text", "question", "ans0", "ans1", "ans2", "label",
    "info_text0", "info_text1", "info_text2", "info_tag0", "info_tag1", "info_tag2",
    "unknown_loc", "target_loc", "label_type",
]
_REQUIRED = ("example_id", "question_index", "question_polarity", "context_condition",
             "category", "answer_info", "context", "question", "ans0", "ans1", "ans2", "label")
_METADATA_COLUMNS = ("category", "question_index", "example_id", "target_loc")


@dataclass
class BBQData:
    """The loaded items of the requested categories plus provenance: the sha256 and git
    blob id of every file read, and per category where target_loc came from
    (:data:`TARGET_SOURCES`)."""
    directory: Path
    items: pd.DataFrame
    sha256: dict[str, str] = field(default_factory=dict)
    blob: dict[str, str] = field(default_factory=dict)
    target_loc: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def release(self) -> dict[str, ReleaseStatus]:
        """Per file read: is it the official release's file of its name
        (:func:`~fairness_tests.benchmarks.bbq.official.release_status`), from the digests
        this run computed (a BBQData made by hand without blob ids: sha256 only)."""
        return {n: release_status(n, s, self.blob.get(n)) for n, s in sorted(self.sha256.items())}

    @property
    def official(self) -> bool:
        """True when every loaded file is the official release's (git blob id, and
        sha256 where known)."""
        return bool(self.sha256) and all(st.official for st in self.release.values())

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.items["dataset"]))

    @property
    def derived(self) -> list[str]:
        """Categories whose target_loc was derived (no metadata rows)."""
        return [c for c, how in self.target_loc.items() if how == DERIVED]

    def provenance(self) -> dict:
        out = {"directory": str(self.directory), "sha256": dict(self.sha256),
               "official": self.official,
               "release": {n: st.to_dict() for n, st in self.release.items()}}
        if self.derived:
            out["target_loc"] = dict(self.target_loc)
        return out


def derived_target_note(target_loc: Mapping[str, str]) -> str | None:
    """The one text (card, console, pytest summary) saying which categories' target_loc
    was derived because ``additional_metadata.csv`` has no rows for them; None if none."""
    derived = [c for c, how in target_loc.items() if how == DERIVED]
    if not derived:
        return None
    return (f"derived by the BBQ authors' rule (BBQ_results_metadata.R) for "
            f"{', '.join(derived)}: no additional_metadata.csv rows")


def say_derived_target(data: BBQData) -> None:
    """Print :func:`derived_target_note` on stderr, once per load (audit, ``bbq score``)."""
    note = derived_target_note(data.target_loc)
    if note:
        print(f"fairness-tests: note: BBQ target_loc {note}", file=sys.stderr)
#: where ``data fetch`` is suggested to install the data (inside the repository, ignored
#: by the ``.gitignore`` that ``fairness-tests init`` writes)
SUGGESTED_DIR = ".fairness/bbq"
#: the options that choose the BBQ directory, per context: the command line's and pytest's
CLI_OPTIONS = "--bbq-dir"
PYTEST_OPTIONS = "--fairness-bbq-dir (ini fairness_bbq_dir)"


class BBQDataNotFound(DataError):
    """The one-line "BBQ data not found": what is missing and how to get it (the
    ``data fetch`` line: into the directory looked in when it exists or lies in the
    working directory, else into :data:`SUGGESTED_DIR` and then the options that point at
    it, in the words of the context: :meth:`message`). ``str()`` is the command line's
    wording."""

    def __init__(self, directory: Path, what: str, categories: tuple[str, ...] = ()):
        self.directory, self.what, self.categories = Path(directory), what, categories
        super().__init__(self._text(CLI_OPTIONS), path=display_path(directory))

    def _text(self, options: str) -> str:
        cats = f" --categories {' '.join(self.categories)}" if self.categories else ""
        rel = os.path.relpath(os.path.abspath(self.directory))
        inside = not rel.startswith("..") and not os.path.isabs(rel)
        here = inside or self.directory.is_dir()    # add to it where it is looked for
        dest = (Path(rel).as_posix() if inside else os.path.abspath(self.directory)) \
            if here else SUGGESTED_DIR
        point = (f", or point {options} or {ENV_BBQ_DIR} at another BBQ directory" if here
                 else f", then point {options} or {ENV_BBQ_DIR} at it "
                 f"(export {ENV_BBQ_DIR}=$PWD/{dest})")
        return (f"BBQ data not found: {self.what}; install it with `fairness-tests data "
                f"fetch{cats} --dest {dest}` (offline: add --from DIR, a local copy of the "
                f"BBQ release){point}")

    def message(self, options: str) -> str:
        """The message with ``options`` as the options that choose the directory."""
        return f"{self.path}: {self._text(options)}"

    def in_pytest(self) -> str:
        return self.message(PYTEST_OPTIONS)


def not_found(directory: Path, what: str, categories: tuple[str, ...] = ()) -> DataError:
    """The one-line "BBQ data not found" error (:class:`BBQDataNotFound`)."""
    return BBQDataNotFound(directory, what, categories)


def category_file(directory: Path, category: str) -> Path | None:
    """``data/<Category>.jsonl`` or ``<Category>.jsonl`` under ``directory``."""
    for p in (directory / "data" / file_name(category), directory / file_name(category)):
        if p.is_file():
            return p
    return None


def metadata_file(directory: Path) -> Path | None:
    return next((directory / p for p in METADATA_PLACES if (directory / p).is_file()), None)


def load_bbq(directory: str | Path, datasets: tuple[str, ...] | None = DATASETS,
             require_official: bool = False) -> BBQData:
    """Load the given categories from ``directory`` (see module docstring);
    ``datasets``: category names or ``("all",)`` (None: the intersectional two)."""
    directory = Path(directory)
    categories, paths, meta_path, sha, blob = _located(directory, datasets, require_official)
    return _parse(directory, categories, paths, meta_path, sha, blob)


def load_filtered(directory: str | Path, datasets: tuple[str, ...] | None = DATASETS,
                  filter: str = "intersectional",
                  require_official: bool = False) -> tuple[BBQData, pd.DataFrame]:
    """:func:`load_bbq` and the items kept by ``filter``
    (:func:`fairness_tests.benchmarks.bbq.filter.filter_items`), what an audit and ``bbq
    score`` start from. Parsing 27,000 items takes about a second, so the result is
    kept in the user cache (:func:`fairness_tests.core.cache.cached`) under the files'
    sha256, the categories, the filter and the digest of this package's code and data:
    the files are still read and hashed each time (and checked with
    ``require_official``), never parsed twice; :attr:`BBQData.release` is computed from
    those digests, in every run."""
    directory = Path(directory)
    categories, paths, meta_path, sha, blob = _located(directory, datasets, require_official)

    def build() -> tuple[BBQData, pd.DataFrame]:
        data = _parse(directory, categories, paths, meta_path, sha, blob)
        return data, filter_items(data.items, filter)

    key = {"files": {p.name: sha[p.name] for p in [*paths.values(), *([meta_path] if meta_path
                                                                         else [])]},
           "layout": {c: str(p.relative_to(directory)) for c, p in paths.items()},
           "categories": list(categories), "filter": filter, "code": _code_digest()}
    data, kept = cached("bbq-items", key, build)
    say_derived_target(data)
    # this run's digests, never a cached copy's: the release status is computed from them
    return replace(data, directory=directory, sha256=sha, blob=blob), kept


@functools.cache
def _code_digest() -> str:
    """The digest of what parses and filters the items: this package's modules and the
    packaged BBQ tables (templates, occupations)."""
    return code_digest(Path(__file__).parent, DATA_DIR / "bbq")


def _located(directory: Path, datasets: tuple[str, ...] | None, require_official: bool):
    """(categories, {category: file}, metadata file or None, sha256s, blob ids) of the
    files to read, each file's digests computed and, with ``require_official``, checked."""
    categories = resolve_categories(datasets)
    if not directory.is_dir():
        raise not_found(directory, "no such directory", categories)
    paths = {}
    for c in categories:
        p = category_file(directory, c)
        if p is None:
            raise not_found(directory, f"no {file_name(c)} (nor data/{file_name(c)})", (c,))
        paths[c] = p
    meta_path = metadata_file(directory)
    files = [*paths.values(), *([meta_path] if meta_path else [])]
    sha, blob = {}, {}
    for p in files:
        sha[p.name], blob[p.name] = digests(p)
    if require_official:
        for p in files:
            why = verify(p.name, sha[p.name], blob[p.name])
            if why:
                raise DataError(f"not the official release's file: {why}", path=p)
    return categories, paths, meta_path, sha, blob


def _parse(directory: Path, categories: tuple[str, ...], paths: dict[str, Path],
           meta_path: Path | None, sha: dict[str, str], blob: dict[str, str]) -> BBQData:
    """The items of the located files, joined with their metadata rows (or derived)."""
    metadata = read_metadata(meta_path) if meta_path else None
    frames, sources, notes = [], {}, []
    for c in categories:
        rows = None if metadata is None else metadata[metadata["category"] == c]
        if rows is not None and len(rows):
            assert meta_path is not None  # rows come from the metadata file
            rows, note = dedupe_metadata(rows, c, meta_path)
            notes += note
            frames.append(join_metadata(read_items(paths[c], c), rows, meta_path, paths[c]))
            sources[c] = FROM_METADATA
        else:
            frames.append(read_items(paths[c], c, derive=True))
            sources[c] = DERIVED
    items = pd.concat(frames, ignore_index=True)
    return BBQData(directory=directory, items=items, sha256=sha, blob=blob,
                   target_loc=sources, notes=notes)


def _derived(record: dict, dataset: str, target: bool) -> tuple[float, str]:
    """(target_loc or NaN, label_type) by the authors' rule (target_loc NaN unless
    ``target``)."""
    var2, names = authors.intersectional_templates().get(
        (dataset, str(record["question_index"]).strip()), (None, None)) \
        if dataset in INTERSECTIONAL else (None, None)
    t = authors.target_loc(record, var2) if target else None
    return (np.nan if t is None else float(t)), authors.label_type(record, names)


def read_items(path: str | Path, dataset: str, derive: bool = False) -> pd.DataFrame:
    """Items of one ``<dataset>.jsonl`` file, validated; with ``derive``, target_loc and
    label_type by the BBQ authors' rule (else target_loc NaN and label_type by the
    rule, for :func:`join_metadata` to replace)."""
    path = Path(path)
    records, numbers = json_lines(path)
    if not records:
        raise DataError("no items", path=path)
    cols: dict[str, list] = {c: [] for c in ITEM_COLUMNS if c not in ("unknown_loc",)}
    for r, no in zip(records, numbers, strict=True):
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
        for name in ("context", "question", "ans0", "ans1", "ans2"):
            if not isinstance(r[name], str):
                raise DataError(f"{name} must be a string", path=path, line=int(no), key=name)
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
        target, ltype = _derived(r, dataset, derive)
        cols["target_loc"].append(target)
        cols["label_type"].append(ltype)
    df = pd.DataFrame(cols)
    df["example_id"] = df["example_id"].astype(np.int64)
    df["label"] = df["label"].astype(np.int64)
    dup = df["example_id"].duplicated()
    if dup.any():
        row = df[dup].iloc[0]
        raise DataError(f"duplicate example_id {row.example_id}", path=path, line=int(row.line))
    tags = df[["info_tag0", "info_tag1", "info_tag2"]].to_numpy() == "unknown"
    df["unknown_loc"] = np.where(tags.sum(axis=1) == 1, tags.argmax(axis=1), np.nan)
    df["target_loc"] = df["target_loc"].astype(np.float64)
    return df[ITEM_COLUMNS]


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
    meta = meta[[*_METADATA_COLUMNS, *(["label_type"] if "label_type" in meta else [])]].copy()
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


def dedupe_metadata(rows: pd.DataFrame, dataset: str, meta_path: Path
                    ) -> tuple[pd.DataFrame, list[str]]:
    """One metadata row per example_id. Rows repeated with the same target_loc are one;
    an example_id with rows that disagree keeps its first row, and a note says how many
    (the official file lists Gender_identity question 12 under two template rows)."""
    dup = rows["example_id"].duplicated(keep=False)
    if not dup.any():
        return rows, []
    same = rows.duplicated(["example_id", "question_index", "target_loc"])
    rows = rows[~same]
    again = rows["example_id"].duplicated()
    notes = []
    if again.any():
        n = int(rows.loc[again, "example_id"].nunique())
        first = int(rows.loc[again, "line"].iloc[0])
        notes.append(f"{dataset}: {n} example_id(s) have metadata rows with different "
                     f"target_loc in {meta_path.name} (first at line {first}); the first "
                     "row of each is used")
        rows = rows[~again]
    return rows, notes


def join_metadata(items: pd.DataFrame, meta: pd.DataFrame, meta_path: Path,
                  items_path: Path) -> pd.DataFrame:
    """Join target_loc (and label_type, when the file has it) onto one dataset's items
    from its metadata rows (one per example_id); any mismatch is a DataError."""
    dataset = items["dataset"].iat[0]
    m = meta[meta["category"] == dataset]
    if m.empty:
        raise DataError(f"no rows for category {dataset!r}", path=meta_path)
    dup = m["example_id"].duplicated()
    if dup.any():
        row = m[dup].iloc[0]
        raise DataError(f"duplicate row for {dataset} example_id {row.example_id}",
                        path=meta_path, line=int(row.line))
    cols = ["example_id", "question_index", "target_loc", "line",
            *(["label_type"] if "label_type" in m else [])]
    j = items.drop(columns=["target_loc"]).merge(
        m[cols], on="example_id", how="outer", suffixes=("", "_meta"), indicator=True)
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
    if "label_type_meta" in j:
        j["label_type"] = j["label_type_meta"].where(j["label_type_meta"].isin(["name", "label"]),
                                                     j["label_type"])
    return j[ITEM_COLUMNS]
