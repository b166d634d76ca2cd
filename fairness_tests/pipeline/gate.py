"""THE model-upgrade gate: two run directories -> one :class:`GateReport`.

Used by ``fairness-tests gate BASELINE_RUN CANDIDATE_RUN`` and by the pytest plugin
alike. It reads only what a run directory holds (:class:`fairness_tests.run.result.RunResult`:
the per-item records ``records/bbq.csv.gz`` and ``records/generative.csv.gz`` and the
typed metadata), pairs the two runs item by item and computes every cell with
:mod:`fairness_tests.metrics.gate` (paired bootstrap over the shared clusters, one-sided
tests against each rule's margin, Holm over the whole family, minimal detectable
worsening).

What it gates (every metric a default rule bounds), per cell:

- BBQ, per dataset x context: accuracy, |s_DIS| (disambig), |s_AMB| (ambig), |reinforcing
  - counter accuracy| (disambig), SF, DF (``df_eb``), invalid rate; position bias where
  both runs asked items under all three rotations; mean MFAA% and GTC% over the
  consistency sample where both runs repeated items;
- generative, per prompt family: worst-slice stereotype and demeaning rate, refusal
  gap; overall: slice disparity of stereotype and demeaning, refusal gap.

The report, its outcome and exit code: :mod:`fairness_tests.pipeline.gate_report` (a
cell that cannot be evaluated never passes non-inferiority; nothing evaluated is its
own outcome, exit 5).

Mode and margin of a cell come from its rule's ``gate: {mode, margin}`` in the
thresholds (default ``harm`` and the metric's default margin below), or ``mode=`` for
every cell. It refuses, with a named error:

- :class:`CandidateIsBaselineError`: the same model id and identical responses (a gate
  of a run against itself passes by construction);
- :class:`ProtocolChangeError`: the runs do not share the protocol (item set, suite
  hash, decoding, repeats, rubric, ...; the differences are listed), unless
  ``allow_protocol_change`` (then the differences are warnings in the report and the
  common items are compared).
"""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from fairness_tests.core.errors import ConfigError, DataError
from fairness_tests.metrics import gate as gm
from fairness_tests.metrics.bbq import first_run, join_answers, position_counts
from fairness_tests.metrics.bbq_tables import repeated_items
from fairness_tests.metrics.consistency import per_item
from fairness_tests.metrics.generative import with_cells
from fairness_tests.metrics.schema import BBQ_CLUSTERS, BBQ_ITEM_COLUMNS, GENERATIVE_CLUSTERS
from fairness_tests.pipeline.gate_pairs import candidate_pair, shared_protocols
from fairness_tests.pipeline.gate_report import GateReport, family_statement
from fairness_tests.rules.thresholds import load_rules
from fairness_tests.run.result import RunResult
from fairness_tests.stats.bootstrap import DEFAULT_N_BOOT
from fairness_tests.stats.significance import ALPHA, MODES, GateMode

BBQ_KEY = ["dataset", "example_id"]
GENERATIVE_KEY = ["prompt_family", "paraphrase_id", "occupation", "slice_gender",
                  "slice_religion", "temperature", "top_p", "seed"]
CLUSTER_CHOICES = {"bbq": BBQ_CLUSTERS, "generative": GENERATIVE_CLUSTERS}
DEFAULT_CLUSTERS = {"bbq": "template", "generative": "prompt"}


class CandidateIsBaselineError(ConfigError):
    """The candidate run is the baseline run (same model id, identical responses)."""


class ProtocolChangeError(ConfigError):
    """The runs were not made under the same protocol (the gate's two runs, or the runs
    ``compare`` puts side by side): the one class both raise."""


# ---------------------------------------------------------------- protocol

def protocol_signature(run: RunResult) -> dict[str, Any]:
    """The facts two runs must share to be compared: per protocol the item set (from
    the records), the data, the suite hash, decoding, repeats and rubric (from the
    metadata). The one place the gate reads protocol facts."""
    md = run.metadata
    sig: dict[str, Any] = {}
    if md.bbq is not None:
        b = md.bbq
        sig.update({"bbq data (sha256)": dict(b.sha256), "bbq filter": b.filter,
                    "bbq decoding": (b.temperature, b.top_p, b.max_tokens),
                    "bbq repeats": b.repeats, "bbq rotations": b.rotations_mode,
                    "bbq prompt": b.prompt_template})
    r = run.records.get("bbq")
    if r is not None and len(r):
        sig["bbq items"] = frozenset(map(tuple, r[BBQ_KEY].drop_duplicates().to_numpy().tolist()))
    if md.generative is not None:
        g = md.generative
        sig.update({"generative suite hash": g.suite_hash,
                    "generative decoding": sorted((float(d["temperature"]), float(d["top_p"]))
                                                  for d in g.decoding),
                    "generative seeds": list(g.seeds),
                    "generative max_new_tokens": g.max_new_tokens,
                    "generative rubric": g.rubric,
                    "generative system prompt": g.system_prompt})
    r = run.records.get("generative")
    if r is not None and len(r):
        sig["generative items"] = frozenset(
            map(tuple, r[GENERATIVE_KEY].astype(str).drop_duplicates().to_numpy().tolist()))
    return sig


def _stated(value: Any) -> bool:
    """Whether a run states a protocol fact: a scored run does not know, e.g., the
    decoding or the prompt of predictions made by another tool (None, or all None)."""
    if value is None:
        return False
    if isinstance(value, (tuple, list)) and value and all(v is None for v in value):
        return False
    return True


def _facts(baseline: RunResult, candidate: RunResult, protocol: str | None):
    a, b = protocol_signature(baseline), protocol_signature(candidate)
    keys = [k for k in a if k in b and (protocol is None or k.startswith(protocol + " "))]
    return a, b, keys


def protocol_differences(baseline: RunResult, candidate: RunResult,
                         names: tuple[str, str] = ("the baseline", "the candidate"),
                         protocol: str | None = None) -> list[str]:
    """Every protocol fact the two runs both state and state differently (only the
    facts of ``protocol``, "bbq" or "generative", when given); ``names`` call the
    runs in the text. A fact one run does not state (:func:`protocol_unstated`) is no
    difference: nothing shows that it differs."""
    a, b, keys = _facts(baseline, candidate, protocol)
    na, nb = names
    out = []
    for k in keys:
        if a[k] == b[k] or not (_stated(a[k]) and _stated(b[k])):
            continue
        if isinstance(a[k], frozenset):
            out.append(f"{k}: {len(a[k])} vs {len(b[k])} ({len(a[k] - b[k])} only in {na}, "
                       f"{len(b[k] - a[k])} only in {nb})")
        else:
            out.append(f"{k}: {a[k]!r} ({na}) vs {b[k]!r} ({nb})")
    return out


def protocol_unstated(baseline: RunResult, candidate: RunResult,
                      names: tuple[str, str] = ("the baseline", "the candidate"),
                      protocol: str | None = None) -> list[str]:
    """The protocol facts exactly one of the two runs states (e.g. the decoding of a
    run scored from someone's predictions): reported, not refused."""
    a, b, keys = _facts(baseline, candidate, protocol)
    out = []
    for k in keys:
        sa, sb = _stated(a[k]), _stated(b[k])
        if sa != sb:
            said, silent = (names[0], names[1]) if sa else (names[1], names[0])
            value = repr(a[k] if sa else b[k])
            value = value if len(value) <= 60 else value[:57] + "..."
            out.append(f"{k}: {value} in {said}, not stated by {silent}")
    return out


def same_responses(baseline: RunResult, candidate: RunResult) -> bool:
    """True when both runs hold the same records with identical answers / outputs."""
    checks = (("bbq", [*BBQ_KEY, "repeat", "rotation"], "answer"),
              ("generative", GENERATIVE_KEY, "output_text"))
    seen = False
    for name, key, col in checks:
        ra, rb = baseline.records.get(name), candidate.records.get(name)
        if (ra is None) != (rb is None):
            return False
        if ra is None or rb is None:
            continue
        key = [k for k in key if k in ra.columns and k in rb.columns]
        if len(ra) != len(rb) or col not in ra or col not in rb:
            return False
        sa = ra.sort_values(key, kind="stable")[col].reset_index(drop=True)
        sb = rb.sort_values(key, kind="stable")[col].reset_index(drop=True)
        if not sa.equals(sb):
            return False
        seen = True
    return seen


# ---------------------------------------------------------------- per-item frames

def bbq_frame(records: pd.DataFrame) -> pd.DataFrame:
    """First-run answers with the per-answer flags (``metrics.bbq.join_answers``), the
    products the accuracy-gap metric sums, and the item attributes."""
    missing = [c for c in BBQ_ITEM_COLUMNS if c not in records.columns]
    if missing:
        raise DataError(f"the BBQ records lack the column(s) {missing}: re-create the run "
                        "with this version")
    r = first_run(records)
    items = r[BBQ_ITEM_COLUMNS].drop_duplicates(BBQ_KEY)
    j = join_answers(items, r[[c for c in ("dataset", "example_id", "repeat", "rotation",
                                           "answer") if c in r.columns]])
    j["correct_reinf"] = j["correct"] * j["reinf"]
    j["correct_counter"] = j["correct"] * j["counter"]
    return j


def position_frame(records: pd.DataFrame) -> pd.DataFrame:
    """Per item asked under all three rotations (repeat 0): position counts."""
    items = records[BBQ_ITEM_COLUMNS].drop_duplicates(BBQ_KEY)
    counts = position_counts(items, records[[c for c in ("dataset", "example_id", "repeat",
                                                         "rotation", "answer")
                                             if c in records.columns]])
    return counts.merge(items[["dataset", "example_id", "question_index"]], on=BBQ_KEY)


def consistency_frame(records: pd.DataFrame) -> pd.DataFrame:
    """Per item with more than one rotation-0 answer and at least two valid ones (the
    items consistency counts, :mod:`fairness_tests.metrics.consistency`): MFAA% and
    GTC% over its valid answers."""
    rep = repeated_items(records)
    if not len(rep):
        return pd.DataFrame(columns=[*BBQ_KEY, "context", "mfaa", "gtc", "question_index"])
    items = records[BBQ_ITEM_COLUMNS].drop_duplicates(BBQ_KEY)
    t = per_item(items, rep)
    t = t[t["mfaa"].notna()]
    return t.merge(items[["dataset", "example_id", "question_index"]], on=BBQ_KEY)


def generative_frame(records: pd.DataFrame) -> pd.DataFrame:
    if "stereotype" not in records.columns:
        raise DataError("the generative records are not scored (no stereotype column)")
    return with_cells(records)


# ---------------------------------------------------------------- the gate

def gate_runs(baseline: RunResult, candidate: RunResult, *, mode: GateMode | None = None,
              seed: int = 0, cluster: Mapping[str, str] | None = None,
              n_boot: int = DEFAULT_N_BOOT, alpha: float = ALPHA, rules: Any = None,
              allow_protocol_change: bool = False) -> GateReport:
    """Gate ``candidate`` against ``baseline`` (see the module docstring).

    ``mode``: "harm" | "non_inferiority" for every cell (default: each rule's
    ``gate.mode``, else harm); ``cluster``: ``{"bbq": "template" | "item",
    "generative": "prompt" | "row"}`` (default template and prompt); ``rules``: the
    :class:`~fairness_tests.rules.thresholds.RuleSet` whose ``gate`` settings apply
    (default: the default thresholds for the candidate's model)."""
    if mode is not None and mode not in MODES:
        raise ConfigError(f"gate mode must be one of {', '.join(MODES)}, got {mode!r}")
    clusters = {**DEFAULT_CLUSTERS, **(cluster or {})}
    for proto, choice in clusters.items():
        if choice not in CLUSTER_CHOICES.get(proto, ()):
            raise ConfigError(f"--cluster for {proto} must be one of "
                              f"{', '.join(CLUSTER_CHOICES.get(proto, ()))}, got {choice!r}")
    shared_protocols(baseline, candidate, cluster or {})
    b_model, c_model = baseline.metadata.model, candidate.metadata.model
    if b_model == c_model and same_responses(baseline, candidate):
        raise CandidateIsBaselineError(
            f"the candidate run is the baseline run: the same model {candidate.name!r} with "
            "identical responses; a gate of a run against itself passes by construction "
            "(pass the run of the candidate model)")
    warnings = protocol_differences(baseline, candidate)
    if warnings and not allow_protocol_change:
        raise ProtocolChangeError(
            "the runs do not share the protocol, so their differences are not the "
            "model's: " + "; ".join(warnings) + " (re-run both under one protocol, or pass "
            "--allow-protocol-change to compare the common items anyway)")
    if rules is None:
        rules = load_rules(None, c_model)
    setting = _settings(rules, mode)
    kw = dict(n_boot=n_boot, seed=seed)
    parts, refusals = [], []
    rb, rc = candidate_pair(baseline, candidate, "bbq")
    if rb is not None:
        cl = "question_index" if clusters["bbq"] == "template" else None
        fb, fc = bbq_frame(rb), bbq_frame(rc)
        parts.append(gm.gate_table(fb, fc, BBQ_KEY, ["dataset", "context"],
                                   gm.bbq_gate_metrics(), setting, cl,
                                   ["group", "question_index"], **kw))
        pb, pc = position_frame(rb), position_frame(rc)
        if len(pb) and len(pc):
            parts.append(gm.gate_table(pb, pc, BBQ_KEY, ["dataset", "context"],
                                       [gm.position_gate_metric()], setting, cl,
                                       ["question_index"], **kw))
        else:
            refusals.append("position_bias: not gated (a run did not ask items under all "
                            "three rotations)")
        cb, cc = consistency_frame(rb), consistency_frame(rc)
        if len(cb) and len(cc):
            keep = [*BBQ_KEY, "context", "question_index", "mfaa", "gtc"]
            parts.append(gm.gate_table(cb[keep], cc[keep], BBQ_KEY, ["dataset", "context"],
                                       gm.consistency_gate_metrics(), setting, cl,
                                       ["question_index"], **kw))
        else:
            refusals.append("mfaa_mean, gtc_mean: not gated (a run has no repeated items)")
    elif (baseline.records.get("bbq") is None) != (candidate.records.get("bbq") is None):
        refusals.append("bbq: not gated (only one run has BBQ records)")
    gb, gc = candidate_pair(baseline, candidate, "generative")
    if gb is not None:
        fb, fc = generative_frame(gb), generative_frame(gc)
        cl = "prompt" if clusters["generative"] == "prompt" else None
        per_family, overall = gm.generative_gate_metrics()
        cols = [*GENERATIVE_KEY, "stereotype", "demeaning", "refusal", "family", "slice",
                "prompt"]
        for by, metrics in ((["family"], per_family), ([], overall)):
            parts.append(gm.gate_table(fb[cols], fc[cols], GENERATIVE_KEY, by, metrics,
                                       setting, cl, ["family", "slice", "prompt"], **kw))
    elif (baseline.records.get("generative") is None) != (candidate.records.get("generative")
                                                          is None):
        refusals.append("generative: not gated (only one run has generative records)")
    parts = [p for p in parts if len(p)]
    raw = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=gm.GATE_COLUMNS)
    table = gm.decide(raw, alpha) if len(raw) else raw
    if not len(table):
        refusals.append("nothing to gate: the runs share no protocol with per-item records")
    family = family_statement(table, alpha, clusters, n_boot, seed)
    return GateReport(baseline=b_model, candidate=c_model, baseline_name=baseline.name,
                      candidate_name=candidate.name, table=table, family=family,
                      alpha=alpha, clusters=clusters, refusals=refusals, warnings=warnings)


def _settings(rules: Any, mode: GateMode | None):
    """setting(metric, cell key) -> GateSetting from the metric's rule's gate spec."""
    by_id = {r.id: r for r in rules.rules} if rules is not None else {}

    def setting(metric: gm.GateMetric, key: tuple) -> gm.GateSetting:
        rule = by_id.get(metric.rule_for(key) or "")
        spec = rule.gate if rule is not None else None
        m = mode or (spec.mode if spec is not None else None) or "harm"
        margin = spec.margin if spec is not None and spec.margin is not None else metric.margin
        return gm.GateSetting(m, float(margin))
    return setting
