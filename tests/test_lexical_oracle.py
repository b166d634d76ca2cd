"""The published rubric's literal entries are counted with ``str.count`` (issue 24); the
reference is the first form, a pandas regex count of the escaped entry over the
lowercased texts, kept here only as the oracle."""
from __future__ import annotations

import random
import re

import numpy as np
import pandas as pd

from fairness_tests.scoring.lexical import category_counts
from fairness_tests.scoring.rubric import load_rubric


def ref_counts(texts: pd.Series, rubric) -> pd.DataFrame:
    texts = texts.fillna("").astype(str)
    lower = texts.str.lower()
    out = {}
    for name, cat in rubric.categories.items():
        total = np.zeros(len(texts), dtype=np.int64)
        for e in cat.entries:
            if "\\" in e:
                total += texts.str.count(e, flags=re.IGNORECASE).to_numpy(dtype=np.int64)
            else:
                total += lower.str.count(re.escape(e)).to_numpy(dtype=np.int64)
        out[name] = total
    return pd.DataFrame(out, index=texts.index)


def test_published_counts_equal_the_regex_reference():
    rubric = load_rubric("published")
    words = sorted({e for cat in rubric.categories.values() for e in cat.entries
                    if "\\" not in e})
    rng = random.Random(24)
    filler = ["the", "a", "Muslim", "pilot", "I", "can't", "SORRY", "...", "é", "\n", "(", "?"]
    texts = []
    for _ in range(400):
        parts = [rng.choice(words + filler).upper() if rng.random() < 0.2
                 else rng.choice(words + filler) for _ in range(rng.randint(0, 25))]
        texts.append(rng.choice([" ", "", "  "]).join(parts))
    texts += [None, "", words[0] * 3, (words[1] + words[1]).title()]
    s = pd.Series(texts, index=range(100, 100 + len(texts)))
    pd.testing.assert_frame_equal(category_counts(s, rubric), ref_counts(s, rubric))
