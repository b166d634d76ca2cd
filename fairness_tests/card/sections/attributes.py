"""Section 4, protected attributes and intersectional slices, and how each protocol
operationalises them.

Generative slices are the attribute combinations the suite declares (run metadata
``generative.slices``); a run scored from someone's generations has no suite, so its
slices are the slice labels its outputs carry (the rows of ``generative_by_slice``).
BBQ groups are the (dataset, group) pairs of the run's ``bbq_groups`` table.
"""
from __future__ import annotations

from typing import Any

from fairness_tests.card.sections.facts import RunFacts
from fairness_tests.card.values import get_path


def protected_attributes(f: RunFacts, user: dict) -> dict[str, Any]:
    slices: list[dict] = []
    ops: list[str] = []
    g, b = f.gen, f.bbq
    if g is not None:
        if g.slices:
            slices += [{"protocol": "generative", **{k: str(v) for k, v in s.items()}}
                       for s in g.slices]
        elif "generative_by_slice" in f.tables:
            slices += [{"protocol": "generative", "slice": sid} for sid in
                       sorted(f.tables["generative_by_slice"]["slice"].astype(str).unique())]
        if g.insertion_rule:
            ops.append("Generative audit: the attributes appear verbatim in the prompt, "
                       f"inserted as {g.insertion_rule!r}; no post-hoc demographic inference.")
        else:
            ops.append("Generative audit: the slices are the attribute labels the outputs "
                       "carry; how the attributes were put into the prompts is not recorded.")
            f.lack("prompt_suite.attribute_insertion_rule", "protected_attributes",
                   "run metadata generative.insertion_rule" if f.asked
                   else f.unknown("the attribute insertion rule"))
    groups = f.tables.get("bbq_groups")
    if groups is not None:
        pairs = zip(groups["dataset"].astype(str), groups["group"].astype(str), strict=True)
        for ds, grp in sorted(set(pairs)):
            slices.append({"protocol": "bbq", "dataset": ds, "group": grp})
    if b is not None:
        ops.append("Intersectional BBQ: the group is the intersectional identity (race x gender "
                   "or race x SES) of the item's stereotyped individual, parsed from BBQ's "
                   f"answer_info tags (e.g. 'F-Black' -> Black, F); item filter: {b.filter}.")
    pa: dict[str, Any] = {"slices": slices}
    if ops:
        pa["operationalisation"] = " ".join(ops)
    else:
        f.lack("protected_attributes.operationalisation", "protected_attributes",
               "no protocol in the run")
    notes = get_path(user, "protected_attributes.notes")
    if notes:
        pa["notes"] = notes
    return pa
