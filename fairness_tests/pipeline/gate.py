"""THE model-upgrade gate: two run directories -> one :class:`GateReport`.

Used by ``fairness-tests gate BASELINE_RUN CANDIDATE_RUN`` and by the pytest plugin
alike. It reads only what a run directory holds (:class:`fairness_tests.run.result.RunResult`:
the per-item records ``records/<family>.csv.gz`` and the typed metadata), pairs the two
runs item by item and computes every cell with :mod:`fairness_tests.metrics.gate`
(paired bootstrap over the shared clusters, one-sided tests against each rule's margin,
Holm over the whole family, minimal detectable worsening).

What it gates is each registered family's (``Family.gate_parts``, in the benchmark's
own folder: e.g. BBQ's accuracy, bias scores, SF/DF per dataset x context, the
generative audit's worst-slice rates and refusal gaps); which facts two runs must share,
``Family.protocol_facts``; the resampling unit, ``--cluster FAMILY=UNIT`` among
``FamilySpec.clusters``.

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

from dataclasses import dataclass
from typing import Any, Mapping

import pandas as pd

from fairness_tests.core.errors import ConfigError
from fairness_tests.core.registry import cluster_choices, default_clusters, load
from fairness_tests.metrics import gate as gm
from fairness_tests.pipeline.benchmark import FamilySpec, GatePart, families
from fairness_tests.pipeline.gate_pairs import candidate_pair, shared_families
from fairness_tests.pipeline.gate_report import GateReport, family_statement
from fairness_tests.rules.thresholds import load_rules
from fairness_tests.run.result import RunResult
from fairness_tests.stats.bootstrap import DEFAULT_N_BOOT
from fairness_tests.stats.significance import ALPHA, MODES, GateMode


@dataclass(frozen=True)
class Gated:
    """A gate part of a registered family, with the cluster column of the chosen unit."""
    family: FamilySpec
    part: GatePart
    cluster: str | None


def gated_parts(cluster: Mapping[str, str] | None = None) -> list[Gated]:
    """Every gated family's :class:`GatePart`, in registry order, with the cluster
    column of ``cluster``'s unit for it (default: each family's first unit); an unknown
    family or unit is a :class:`ConfigError` naming the choices."""
    choices = cluster_choices()
    clusters = {**default_clusters(), **(cluster or {})}
    for name, choice in clusters.items():
        if choice not in choices.get(name, ()):
            known = ", ".join(choices.get(name, ())) or "none: not a gated family"
            raise ConfigError(f"--cluster for {name} must be one of {known}, got {choice!r}")
    out = []
    for spec in families():
        if spec.gated:
            for part in load(spec.impl).gate_parts():
                out.append(Gated(spec, part, part.cluster_columns.get(clusters.get(spec.name,
                                                                                    ""))))
    return out


class CandidateIsBaselineError(ConfigError):
    """The candidate run is the baseline run (same model id, identical responses)."""


class ProtocolChangeError(ConfigError):
    """The runs were not made under the same protocol (the gate's two runs, or the runs
    ``compare`` puts side by side): the one class both raise."""


# ---------------------------------------------------------------- protocol

def protocol_signature(run: RunResult) -> dict[str, Any]:
    """The facts two runs must share to be compared: each family's
    (``Family.protocol_facts``: its item set, data, decoding, ...), keyed
    ``"<family> <fact>"``. The one place the gate reads protocol facts."""
    sig: dict[str, Any] = {}
    for spec in families():
        facts = load(spec.impl).protocol_facts(run.metadata.infos.get(spec.metadata_key),
                                               run.records.get(spec.records))
        sig.update({f"{spec.name} {k}": v for k, v in facts.items()})
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
    facts of the family ``protocol``, when given); ``names`` call the
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
    """True when both runs hold the same records with identical answers / outputs (each
    family's ``Family.response_key``)."""
    seen = False
    for spec in families():
        rk = load(spec.impl).response_key()
        ra, rb = baseline.records.get(spec.records), candidate.records.get(spec.records)
        if (ra is None) != (rb is None):
            return False
        if ra is None or rb is None or rk is None:
            continue
        key = [k for k in rk[0] if k in ra.columns and k in rb.columns]
        col = rk[1]
        if len(ra) != len(rb) or col not in ra or col not in rb:
            return False
        sa = ra.sort_values(key, kind="stable")[col].reset_index(drop=True)
        sb = rb.sort_values(key, kind="stable")[col].reset_index(drop=True)
        if not sa.equals(sb):
            return False
        seen = True
    return seen


# ---------------------------------------------------------------- the gate

def gate_runs(baseline: RunResult, candidate: RunResult, *, mode: GateMode | None = None,
              seed: int = 0, cluster: Mapping[str, str] | None = None,
              n_boot: int = DEFAULT_N_BOOT, alpha: float = ALPHA, rules: Any = None,
              allow_protocol_change: bool = False) -> GateReport:
    """Gate ``candidate`` against ``baseline`` (see the module docstring).

    ``mode``: "harm" | "non_inferiority" for every cell (default: each rule's
    ``gate.mode``, else harm); ``cluster``: ``{family: unit}`` among each family's
    ``clusters`` (default: the first of each); ``rules``: the
    :class:`~fairness_tests.rules.thresholds.RuleSet` whose ``gate`` settings apply
    (default: the default thresholds for the candidate's model)."""
    if mode is not None and mode not in MODES:
        raise ConfigError(f"gate mode must be one of {', '.join(MODES)}, got {mode!r}")
    parts_of = gated_parts(cluster)
    clusters = {**default_clusters(), **(cluster or {})}
    shared_families(baseline, candidate, cluster or {})
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
    frames: dict[tuple[str, int], tuple[pd.DataFrame, pd.DataFrame]] = {}
    one_sided: set[str] = set()
    used: list[Gated] = []
    for g in parts_of:
        rb, rc = candidate_pair(baseline, candidate, g.family.records)
        if rb is None:
            has_b = baseline.records.get(g.family.records) is not None
            if has_b != (candidate.records.get(g.family.records) is not None) \
                    and g.family.name not in one_sided:
                one_sided.add(g.family.name)
                refusals.append(f"{g.family.name}: not gated (only one run has "
                                f"{g.family.name} records)")
            continue
        memo = (g.family.name, id(g.part.frame))
        if memo not in frames:
            frames[memo] = g.part.frame(rb), g.part.frame(rc)
        fb, fc = frames[memo]
        if not len(fb) or not len(fc):
            refusals.append(g.part.skipped)
            continue
        if g.part.columns is not None:
            fb, fc = fb[list(g.part.columns)], fc[list(g.part.columns)]
        used.append(g)
        parts.append(gm.gate_table(fb, fc, list(g.part.key), list(g.part.by),
                                   g.part.metrics(), setting, g.cluster, list(g.part.carry),
                                   **kw))
    gated_families = {g.family.name for g, p in zip(used, parts, strict=True) if len(p)}
    clusters = {f: u for f, u in clusters.items() if f in gated_families}
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
