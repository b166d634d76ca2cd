"""The intersectional filter (issue 2, section 3), and the derived item columns.

The filter applies to the two intersectional categories (Race_x_SES, Race_x_gender);
the single-attribute categories (Age, ..., Sexual_orientation) keep all their items
under either mode.

1. The unknown option is the one whose answer_info tag is ``"unknown"``; both
   other options need non-empty, parsable tags.
2. A tag parses into (race, var2): Race_x_gender ``"F-Black"`` -> (Black, F);
   Race_x_SES ``"lowSES-Hispanic"`` -> (Hispanic, lowSES) and
   ``"lowSES-F-Black"`` -> (Black, lowSES).
3. Keep only items whose two people differ in BOTH race and var2.
4. Race_x_SES only: drop items whose answer options carry no occupation (BBQ's
   SES occupation vocabulary, packaged as ``data/bbq/ses_occupations.csv``): both
   non-unknown options' answer_info texts must name an occupation.

``mode="none"`` keeps every item. Either way :func:`annotate` adds

- ``race{k}``, ``var2{k}`` for each option k (NaN for the unknown option / bad tags),
- ``stereo_loc``: the option of the stereotyped individual (``target_loc`` in
  "neg" items, the other non-unknown option in "nonneg" items),
- ``group``: that individual's identity: in the intersectional categories
  ``"<race>:<var2>"``; in a single-attribute category its one attribute, the option's
  answer_info tag normalised as the BBQ authors do (``woman`` -> ``F``, name items'
  ``F-Black`` -> ``Black``: :func:`~fairness_tests.benchmarks.bbq.authors.single_attribute_group`),
- ``reinforcing``: disambiguated items whose correct answer is ``target_loc``
  (1.0), is not (0.0); NaN for ambiguous items or without target_loc.
"""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pandas as pd

from fairness_tests.benchmarks.bbq.authors import single_attribute_group
from fairness_tests.benchmarks.bbq.official import INTERSECTIONAL
from fairness_tests.core.errors import ConfigError
from fairness_tests.core.paths import DATA_DIR

MODES = ("intersectional", "none")
OCCUPATIONS_FILE = DATA_DIR / "bbq" / "ses_occupations.csv"


@lru_cache(maxsize=1)
def ses_occupations() -> tuple[str, ...]:
    table = pd.read_csv(OCCUPATIONS_FILE, comment="#")
    return tuple(sorted(table["occupation"].str.strip()))


def _occupation_pattern() -> str:
    words = sorted(ses_occupations(), key=len, reverse=True)
    return r"\b(?:" + "|".join(re.escape(w) for w in words) + r")\b"


def parse_tags(dataset: str, tags: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Vectorised tag parse -> (race, var2); NaN where a tag is empty or unparsable."""
    tags = tags.fillna("").astype(str)
    parts = tags.str.split("-")
    n = parts.str.len()  # type: ignore[misc]  # pandas-stubs: .str on lists is valid
    first, last = parts.str[0], parts.str[-1]
    if dataset == "Race_x_gender":
        ok = n >= 2
        var2 = first
        race = tags.str.split("-", n=1).str[-1]
    else:  # Race_x_SES: lowSES-Hispanic | lowSES-F-Black
        ok = n.isin([2, 3])
        var2, race = first, last
    ok = ok & (tags != "unknown") & (var2.str.strip() != "") & (race.str.strip() != "")
    return race.where(ok), var2.where(ok)


def annotate(items: pd.DataFrame) -> pd.DataFrame:
    """Add race/var2 per option, stereo_loc, group and reinforcing (see module doc)."""
    out = items.copy()
    if not out["dataset"].isin(INTERSECTIONAL).all():      # single-attribute: no race/var2
        for k in range(3):
            out[f"race{k}"] = pd.Series(np.nan, index=out.index, dtype=object)
            out[f"var2_{k}"] = pd.Series(np.nan, index=out.index, dtype=object)
    for ds, idx in out.groupby("dataset", sort=False).groups.items():
        if ds not in INTERSECTIONAL:
            continue
        for k in range(3):
            race, var2 = parse_tags(ds, out.loc[idx, f"info_tag{k}"])
            out.loc[idx, f"race{k}"] = race
            out.loc[idx, f"var2_{k}"] = var2
    u = out["unknown_loc"].to_numpy(dtype=np.float64)
    t = out["target_loc"].to_numpy(dtype=np.float64)
    ok = ~np.isnan(u) & ~np.isnan(t) & (u != t)
    other = 3.0 - u - t                     # option indices sum to 0 + 1 + 2 = 3
    neg = (out["polarity"] == "neg").to_numpy()
    stereo = np.where(ok, np.where(neg, t, other), np.nan)
    out["stereo_loc"] = stereo
    races = out[["race0", "race1", "race2"]].to_numpy(dtype=object)
    var2s = out[["var2_0", "var2_1", "var2_2"]].to_numpy(dtype=object)
    rows = np.flatnonzero(ok)
    s = stereo[rows].astype(np.int64)
    group = np.full(len(out), None, dtype=object)
    r, v = races[rows, s], var2s[rows, s]
    good = pd.notna(r) & pd.notna(v)
    group[rows[good]] = [f"{a}:{b}" for a, b in zip(r[good], v[good], strict=True)]
    single = ~out["dataset"].isin(INTERSECTIONAL).to_numpy()[rows]
    if single.any():
        tags = out[["info_tag0", "info_tag1", "info_tag2"]].to_numpy(dtype=object)[rows, s]
        group[rows[single]] = [single_attribute_group(t) for t in tags[single]]
    out["group"] = pd.Series(group, index=out.index, dtype=object)
    dis = (out["context"] == "disambig").to_numpy() & ~np.isnan(t)
    out["reinforcing"] = np.where(dis, (out["label"].to_numpy() == t).astype(float), np.nan)
    return out


def keep_mask(items: pd.DataFrame) -> pd.DataFrame:
    """Per item, which step of the filter it passes (columns step1..step4, keep)."""
    a = items if "race0" in items.columns else annotate(items)
    u = a["unknown_loc"].to_numpy(dtype=np.float64)
    has_unknown = ~np.isnan(u)
    races = a[["race0", "race1", "race2"]].to_numpy(dtype=object)
    var2s = a[["var2_0", "var2_1", "var2_2"]].to_numpy(dtype=object)
    texts = a[["info_text0", "info_text1", "info_text2"]].to_numpy(dtype=object)
    n = len(a)
    uu = np.where(has_unknown, u, 0).astype(np.int64)
    # the two non-unknown options, in index order
    others = np.array([[1, 2], [0, 2], [0, 1]])[uu]
    rr = np.take_along_axis(races, others, axis=1)
    vv = np.take_along_axis(var2s, others, axis=1)
    tt = np.take_along_axis(texts, others, axis=1)
    parsable = has_unknown & pd.notna(rr).all(axis=1) & pd.notna(vv).all(axis=1)
    differ = parsable & (rr[:, 0] != rr[:, 1]) & (vv[:, 0] != vv[:, 1])
    pattern = _occupation_pattern()
    occ = np.ones(n, dtype=bool)
    ses = (a["dataset"] == "Race_x_SES").to_numpy()
    if ses.any():
        t0 = pd.Series(tt[:, 0], dtype=object).fillna("").str.contains(pattern, regex=True)
        t1 = pd.Series(tt[:, 1], dtype=object).fillna("").str.contains(pattern, regex=True)
        occ = np.where(ses, (t0 & t1).to_numpy(), True)
    single = ~a["dataset"].isin(INTERSECTIONAL).to_numpy()
    return pd.DataFrame({
        "step1_unknown_and_parsable": parsable | single,
        "step3_differ_in_both": differ | single,
        "step4_occupation": (differ & occ) | single,
        "keep": (differ & occ) | single,
    }, index=a.index)


def filter_items(items: pd.DataFrame, mode: str = "intersectional") -> pd.DataFrame:
    """The items kept by ``mode`` ("intersectional" or "none"), annotated."""
    if mode not in MODES:
        raise ConfigError(f"unknown filter {mode!r}; choose one of {', '.join(MODES)}")
    a = annotate(items)
    if mode == "none":
        return a.reset_index(drop=True)
    return a[keep_mask(a)["keep"].to_numpy()].reset_index(drop=True)


def filter_counts(items: pd.DataFrame, kept: pd.DataFrame) -> pd.DataFrame:
    """Counts per dataset, context and polarity of the kept items, with the loaded
    totals and the disambiguated reinforcing / counter-stereotypical split."""
    loaded = items.groupby(["dataset", "context", "polarity"]).size().rename("n_loaded")
    g = kept.groupby(["dataset", "context", "polarity"])
    out = pd.concat([
        loaded,
        g.size().rename("n_items"),
        g["reinforcing"].apply(lambda s: int((s == 1).sum())).rename("n_reinforcing"),
        g["reinforcing"].apply(lambda s: int((s == 0).sum())).rename("n_counter"),
    ], axis=1).fillna(0).astype(np.int64).reset_index()
    return out
