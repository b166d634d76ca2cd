"""Fill a Fairness Card from a run (:class:`fairness_tests.run.result.RunResult`) and a user YAML.

:func:`fill_card` is the one entry point. Everything the run knows comes from its typed
metadata (:class:`fairness_tests.run.metadata.RunMetadata`, read as it is: no shape is
guessed), its tables and its verdicts, one module per card section
(:mod:`fairness_tests.card.sections`). What a run cannot know (intended use, harm model,
mitigations, governance, ...) comes from the user YAML (:mod:`.user_yaml`). A required
field that neither supplies is left out of the card and listed under
``missing_fields``; nothing is invented. A run scored from someone else's predictions or
generations knows no prompt, decoding or answer parsing: those are listed as missing.
The card never recomputes a metric.
"""
from __future__ import annotations

import copy
from typing import Any

from fairness_tests.card.schema import CARD_VERSION, user_fields
from fairness_tests.card.sections.attributes import protected_attributes
from fairness_tests.card.sections.facts import RunFacts
from fairness_tests.card.sections.gate import upgrade_gate
from fairness_tests.card.sections.identification import identification
from fairness_tests.card.sections.protocol import (
    decoding,
    evaluation_protocol,
    prompt_suite,
    refusal_handling,
    scorer,
)
from fairness_tests.card.sections.reproducibility import reproducibility
from fairness_tests.card.sections.results import decision_rules, metrics, results, verdict_rows
from fairness_tests.card.user_yaml import check_user_keys
from fairness_tests.card.values import clean, get_path
from fairness_tests.run.result import RunResult

USER_SECTIONS = ("authors", "intended_use", "fairness_scope", "mitigations", "governance")


def fill_card(run: RunResult, user: dict | None = None, user_source: str | None = None,
              gate: dict | None = None, gate_source: str = "gate record") -> dict:
    """The card dict for ``run`` (+ the user's fields; + ``gate``, the record of
    ``fairness-tests gate`` with this run as the candidate). Deterministic."""
    user = copy.deepcopy(user or {})
    check_user_keys(user, source=user_source)
    user = clean(user)
    f = RunFacts.of(run)
    card: dict[str, Any] = {"card_version": CARD_VERSION, "modality": "text",
                            **identification(f, user, user_source)}
    for key in USER_SECTIONS:
        if _present(user.get(key)):
            card[key] = user[key]
    card["protected_attributes"] = protected_attributes(f, user)
    card["prompt_suite"] = prompt_suite(f)
    card["decoding"] = decoding(f)
    card["refusal_handling"] = refusal_handling(f)
    card["scorer"] = scorer(f)
    card["evaluation_protocol"] = evaluation_protocol(f)
    card["metrics"] = metrics(f)
    card["decision_rules"] = decision_rules(f)
    card["verdicts"] = verdict_rows(f)
    card["results"] = results(f)
    if gate is not None:
        card["upgrade_gate"] = upgrade_gate(gate, run.metadata.model, gate_source)
    card["reproducibility"] = reproducibility(f, user)
    card["missing_fields"] = _missing(card, f)
    return _sort_keys(clean(card))


def _present(v: Any) -> bool:
    return v is not None and v != "" and v != {}


def _missing(card: dict, f: RunFacts) -> list[dict]:
    """Required user fields nobody supplied, and the run facts the run lacks."""
    surface = card["system"].get("surface")
    missing = []
    for field in user_fields()["fields"]:
        req = field.get("required")
        if (req is True or (req == "served-system" and surface == "served-system")) \
                and not _present(get_path(card, field["path"])):
            missing.append({"field": field["path"], "section": field["section"],
                            "source": "user", "hint": field.get("hint", "")})
    missing += [{"field": path, "section": section, "source": "run", "hint": hint}
                for path, section, hint in f.missing]
    return sorted(missing, key=lambda m: (m["source"], m["field"]))


def _sort_keys(x: Any) -> Any:
    """Key-sorted dicts all the way down: the card in memory is the card read back from
    its YAML (dumped with sorted keys), so rendering either gives the same bytes."""
    if isinstance(x, dict):
        return {k: _sort_keys(x[k]) for k in sorted(x)}
    if isinstance(x, list):
        return [_sort_keys(v) for v in x]
    return x
