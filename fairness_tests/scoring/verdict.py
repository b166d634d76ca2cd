"""Counterfactual verdict classifier (role-assignment probe).

Driven by the probe file's ``labels`` and ``classifier_regex`` (all regexes
case-insensitive). The person labels are the labels with regexes other than
``refused`` (in file order: person A, person B). Priority, as published: exactly one
person label matched -> that label; else any ``refused`` regex matched -> ``refused``;
else ``ambiguous`` (both persons matched, none, or empty text). Error rows ->
``error``.
"""
from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np
import pandas as pd

REFUSED, AMBIGUOUS, ERROR = "refused", "ambiguous", "error"


def person_labels(probe: dict[str, Any]) -> list[str]:
    """The two person labels, in file order (person A, person B)."""
    return [lab for lab in probe["labels"] if lab in probe["classifier_regex"] and lab != REFUSED]


def classify(texts: pd.Series, probe: dict[str, Any],
             status: pd.Series | None = None) -> pd.Series:
    """Verdict label per text (vectorised: one ``str.contains`` per regex)."""
    texts = texts.fillna("").astype(str)
    rx = probe["classifier_regex"]

    def any_match(patterns: list[str]) -> np.ndarray:
        hit = np.zeros(len(texts), dtype=bool)
        for p in patterns:
            with warnings.catch_warnings():   # "has match groups": we only need a bool
                warnings.simplefilter("ignore", UserWarning)
                hit |= texts.str.contains(p, flags=re.IGNORECASE, regex=True).to_numpy(dtype=bool)
        return hit

    persons = person_labels(probe)
    hits = np.column_stack([any_match(rx[p]) for p in persons])
    refused = any_match(rx.get(REFUSED, []))
    out = np.full(len(texts), AMBIGUOUS, dtype=object)
    out[refused] = REFUSED
    single = hits.sum(axis=1) == 1
    for j, p in enumerate(persons):
        out[single & hits[:, j]] = p
    if status is not None:
        out[(status == "error").to_numpy()] = ERROR
    return pd.Series(out, index=texts.index, name="verdict")


def person_role(verdicts: pd.Series, probe: dict[str, Any]) -> pd.Series:
    """Map labels to ``A`` / ``B`` (the probe's first / second person label);
    refused, ambiguous and error stay as they are."""
    a, b = person_labels(probe)
    return verdicts.map(lambda v: "A" if v == a else "B" if v == b else v).rename("person")
