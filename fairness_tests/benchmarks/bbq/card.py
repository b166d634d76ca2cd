"""The BBQ family on the card's results (:meth:`BBQFamily.card_results
<fairness_tests.pipeline.benchmark.Family.card_results>`): the BBQ table per dataset x
context (with its metric panels), the groups, and consistency over repeated runs (with
the per-item MFAA% and GTC% histograms, :func:`consistency_distribution`)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd

from fairness_tests.benchmarks.bbq.data import derived_target_note
from fairness_tests.benchmarks.bbq.describe import data_release
from fairness_tests.benchmarks.bbq.info import BBQInfo
from fairness_tests.benchmarks.bbq.official import INTERSECTIONAL, OFFICIAL_RELEASE
from fairness_tests.pipeline.views import CardProtocol, Histograms, Panels, ProtocolView, View

HIST_EDGES = [float(x) for x in range(0, 101, 10)]
BBQ_PLOT_METRICS = ("accuracy", "s_amb", "s_dis", "acc_reinf", "acc_counter",
                    "acc_reinf_minus_counter", "sf", "df", "df_smoothed", "df_eb",
                    "position_bias", "invalid_rate")
BBQ_ROW_COLUMNS = ("dataset", "context", "polarity")
#: the per-item columns the histograms count
PER_ITEM = ("mfaa", "gtc")

VIEWS = [
    View("Intersectional BBQ per dataset x context", "res_bbq", "bbq", prefer=BBQ_ROW_COLUMNS,
         plots=(Panels("bbq", "BBQ metrics per dataset x context with 95% CIs", BBQ_ROW_COLUMNS,
                       BBQ_PLOT_METRICS),)),
    View("BBQ per intersectional group", "res_bbq_groups", "bbq_groups",
         prefer=("dataset", "group")),
    View("Consistency over repeated runs", "res_consistency", "consistency",
         prefer=("dataset", "context"), also="consistency_distribution",
         plots=(Histograms("consistency_distribution", PER_ITEM),)),
]


def summaries(tables: Mapping[str, pd.DataFrame]) -> dict[str, Any]:
    """``consistency_distribution`` when the run has per-item consistency."""
    if "consistency_items" not in tables:
        return {}
    return {"consistency_distribution": consistency_distribution(tables["consistency_items"])}


def consistency_distribution(items: pd.DataFrame) -> dict:
    """Histogram (10-point bins, the last closed) of the per-item MFAA% and GTC%
    (columns ``mfaa``, ``gtc`` of ``consistency_items``)."""
    out = {}
    for m in PER_ITEM:
        x = pd.to_numeric(items[m], errors="coerce").dropna().to_numpy(dtype=float)
        counts, _ = np.histogram(x, bins=HIST_EDGES)
        out[m] = {"bin_edges": HIST_EDGES, "counts": [int(c) for c in counts], "n": int(x.size),
                  "mean": float(x.mean()) if x.size else None}
    return out


# ---------------------------------------------------------------- the evaluation protocol

ROTATIONS_TEXT = {"all": "all three cyclic option rotations of every item",
                  "sample": "all three cyclic option rotations of the consistency sample",
                  "none": "dataset option order only"}
BBQ_NAME = "BBQ multiple choice (three options)"


#: what two cards' BBQ records must share to measure the same thing (``card diff``)
COMPARABILITY = (
    ("evaluation_protocol.bbq.data_sha256", "BBQ data sha256"),
    ("evaluation_protocol.bbq.filter", "BBQ item filter"),
    ("evaluation_protocol.bbq.rotations_mode", "BBQ option rotations"),
    ("evaluation_protocol.bbq.repeats", "BBQ repeats"),
)


def card_protocol(f: Any, card: CardProtocol) -> None:
    """BBQ's prompt (a family of the prompt suite), its decoding, what counts as invalid,
    how answers were parsed, and its record (data hashes and release, filter, items,
    rotations, consistency sample); ``total_prompts`` adds items x option orders
    (:meth:`fairness_tests.pipeline.benchmark.Family.card_protocol`)."""
    groups = f.tables.get("bbq_groups")
    if groups is not None:
        pairs = zip(groups["dataset"].astype(str), groups["group"].astype(str), strict=True)
        card.slices += [{"protocol": "bbq", "dataset": ds, "group": grp}
                        for ds, grp in sorted(set(pairs))]
    b = f.meta.info("bbq", BBQInfo)
    if b is None:
        return
    if f.asked and card.sample_seeds is None:
        card.sample_seeds = [b.seed]
    card.total_samples += b.n_answers
    card.operationalisation.append(
        "Intersectional BBQ: the group is the intersectional identity (race x gender or race "
        "x SES) of the item's stereotyped individual, parsed from BBQ's answer_info tags "
        f"(e.g. 'F-Black' -> Black, F); item filter: {b.filter}.")
    _prompt(f, b, card)
    _decoding(f, b, card)
    card.refusal.append(
        "BBQ: an answer that cannot be parsed as one of the three options is 'invalid': "
        "counted as wrong and reported as invalid_rate, never dropped or coerced." if f.asked
        else "BBQ: an answer the predictions file gives as null is 'invalid': counted as "
        "wrong and reported as invalid_rate, never dropped; how the other tool turned the "
        "model's text into an option (and what it did with refusals) is not known to this "
        "run.")
    card.scorer_notes.append(
        "BBQ answers parsed by rule ('b', '(b)', 'B.', 'Answer: b' or the option's own text); "
        "anything else is invalid." if f.asked else
        "BBQ: the predictions file gives option indices (0, 1, 2 or null); fairness_tests "
        "parsed no text.")
    card.record["bbq"] = _record(f, b)
    card.seeds["bbq"] = _seeds(f, b)
    c = b.consistency
    card.samples["bbq"] = (
        f"BBQ: one answer per item ({b.n_items} items)"
        + (f"; {c.repeats} repeated answers for each of the {c.n_items} consistency-sample "
           "items" if c is not None else "")
        + f"; {ROTATIONS_TEXT[b.rotations_mode]}.")


def _prompt(f: Any, b: Any, card: CardProtocol) -> None:
    i = len(card.suite["families"])
    fam = {"id": "BBQ", "name": BBQ_NAME}
    if b.prompt_description:
        fam["description"] = b.prompt_description
    elif not f.asked:
        fam["description"] = (f"The answers are {f.scored_from()}; the prompt that "
                              "produced them is not known to this run.")
    if b.prompt_template:
        fam["template"] = b.prompt_template
    else:
        f.lack(f"prompt_suite.families[{i}].template", "evaluation_protocol",
               "run metadata bbq.prompt_template" if f.asked else f.unknown("the BBQ prompt"))
    card.suite["families"].append(fam)
    card.total_prompts += b.n_items * b.rotations


def _decoding(f: Any, b: Any, card: CardProtocol) -> None:
    reg = {"name": "bbq", "protocol": "bbq"}
    for key, value in (("temperature", b.temperature), ("top_p", b.top_p),
                       ("max_new_tokens", b.max_tokens)):
        if value is not None:
            reg[key] = value
        elif key != "max_new_tokens":
            f.lack(f"decoding.regimes[{len(card.regimes)}].{key}", "evaluation_protocol",
                   f"run metadata bbq.{key}" if f.asked
                   else f.unknown(f"the {key} the answers were sampled with"))
    card.regimes.append(reg)
    if card.seeds_per_prompt is None:
        card.seeds_per_prompt = b.repeats
    if card.post_processing is None:
        card.post_processing = (
            "The answer text is parsed as one of the three options; nothing else." if f.asked
            else "Not known to this run: the predictions file gives option indices, not the "
            "model's text.")


def _record(f: Any, b: Any) -> dict[str, Any]:
    """What ``evaluation_protocol.bbq`` records of the run."""
    out: dict[str, Any] = {
        "data_sha256": dict(sorted(b.sha256.items())), "official": b.official,
        "data_release": {st.name: st.to_dict() for st in data_release(b)},
        "filter": b.filter, "n_items": b.n_items, "n_answers": b.n_answers,
        "invalid_answers": b.invalid_answers, "repeats": b.repeats, "rotations": b.rotations,
        "rotations_mode": b.rotations_mode, "bootstrap": asdict(b.bootstrap)}
    for key in ("data_dir", "option_order", "temperature", "limit"):
        if getattr(b, key) is not None:
            out[key] = getattr(b, key)
    out.update(bbq_choices(b))
    if f.asked:
        out["seed"] = b.seed          # the answer-sampling seed (a scored run has none)
    if b.consistency is not None:
        c = b.consistency
        out["consistency"] = {k: v for k, v in (("n_items", c.n_items), ("repeats", c.repeats),
                                                ("seed", c.seed), ("per_cell", c.per_cell))
                              if v is not None}
    return out


def bbq_choices(b: Any) -> dict[str, str]:
    """What a BBQ run chose that the intersectional audit does not (the card says it):
    the categories, target_loc derived by the BBQ authors' rule, their conventions."""
    out = {}
    if b.categories and tuple(b.categories) != INTERSECTIONAL:
        out["categories"] = ", ".join(b.categories)
    derived = derived_target_note(b.target_loc)
    if derived:
        out["target_loc"] = derived
    if b.conventions != "project":
        out["conventions"] = ("the BBQ authors' (unmatched answers and items without a "
                              "target dropped; unknown from the chosen option's tag; "
                              "name-proxy items as separate rows)")
    return out


def _seeds(f: Any, b: Any) -> str:
    boot = (f"bootstrap {b.bootstrap.resamples} resamples, seed {b.bootstrap.seed}")
    if not f.asked:
        return f"BBQ: how the answers were sampled is not known to this run; {boot}."
    cons = b.consistency
    return (f"BBQ: answer sampling seed {b.seed}; {boot}"
            + (f"; consistency sample drawn with seed {cons.seed}"
               if cons is not None and cons.seed is not None else "") + ".")


def protocol_view(record: Mapping[str, Any]) -> ProtocolView:
    """BBQ's data and settings on the card: a warning when a data file read is not the
    official release's, the settings, and each data file's sha256 and release status."""
    rel = record.get("data_release") or {}
    bad = [n for n, r in sorted(rel.items()) if r.get("status") != OFFICIAL_RELEASE]
    warnings = ((f"BBQ data is not the official release: {', '.join(bad)} (digests differ "
                 "from the official BBQ release's files of the same names; see data version "
                 "below). These results are not results on the published benchmark.",)
                if bad else ())
    sha = record.get("data_sha256") or {}
    table = ((["data file", "sha256", "release"],
              [[k, v, _release_cell(rel.get(k))] for k, v in sorted(sha.items())],
              "data version") if sha else None)
    return ProtocolView(
        title="BBQ data and settings", anchor="bbq_protocol", warnings=warnings,
        pairs=tuple((k, record[k]) for k in (
            "data_dir", "categories", "filter", "target_loc", "conventions", "n_items",
            "repeats", "rotations", "temperature", "seed", "bootstrap", "consistency",
            "answer_parser") if k in record),
        table=table)


def _release_cell(rel: Mapping[str, Any] | None) -> str:
    """A data file's release status (``data_release``): ``official release``, or ``not
    the official release`` with the file it claims to be and that file's digest."""
    if not rel:
        return "not recorded"
    status = str(rel.get("status", ""))
    if status == OFFICIAL_RELEASE or "claims" not in rel:
        return status
    official = (f"official sha256 {rel['official_sha256']}" if rel.get("official_sha256")
                else f"official git blob id {rel.get('official_git_blob')}")
    return f"{status} (claims to be {rel['claims']}; {official})"
