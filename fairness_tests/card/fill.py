"""Fill a Fairness Card from a run (:class:`fairness_tests.run.RunResult`) and a user YAML.

Everything the run knows is filled automatically: model, backend and version,
protocol and suite hash, decoding, seeds and repeats, rubric and scorer, data
version (sha256 of the data files), per-slice results with CIs, worst-slice
values, each decision rule's outcome, protocol-dependent verdicts, scorer
sensitivity, consistency summary, evaluation date. What a run cannot know
(intended use, harm model, mitigations, governance, ...) comes from the user
YAML (fields listed in ``data/card_schema/user_fields.yaml``). A required field
that neither supplies is left out of the card and listed under ``missing_fields``;
nothing is invented. The card never recomputes a metric: results are the run's
tables; "worst slice" is a selection (the maximum row) of them.

Run metadata read here (all optional; what is absent is reported):
``model, model_version, snapshot_date, backend, backend_version, recorded_backend,
evaluation_date, fairness_tests_version, chat_template, regen_command,
bbq: {data_dir, sha256: {file: hex}, filter, n_items, repeats, rotations,
temperature, top_p, max_tokens, seed, bootstrap: {n_boot, seed, level},
prompt_template, answer_parser, consistency: {n_items, repeats, seed}},
generative: {suite, suite_hash, families, paraphrases, occupations, slices,
insertion_rule, decoding, seeds, max_new_tokens, system_prompt, rubric,
n_generations, reductions, post_processing}, counterfactual: {...},
thresholds: {files: [...]}`` — see docs/card.md for the accepted shapes.
"""
from __future__ import annotations

import copy
import datetime as _dt
from pathlib import Path
from typing import Any

import pandas as pd

from .. import __version__
from ..errors import ConfigError
from ..run import RunResult
from .schema import CARD_VERSION, read_yaml, line_index, metric_definitions, user_fields
from .values import get_path as _get, clean, finite, records

KNOWN_TABLES = {
    "bbq": "intersectional BBQ metrics per dataset x context",
    "bbq_groups": "BBQ per-group counts and rates",
    "consistency": "consistency over repeated runs (MFAA, GTC)",
    "consistency_items": "per-item MFAA and GTC",
    "generative_by_slice": "generative audit per slice",
    "generative_by_slice_family": "generative audit per slice x prompt family",
    "generative_by_slice_decoding": "generative audit per slice x decoding regime",
    "generative_summary": "worst slice, disparity and refusal gap",
    "scorer_sensitivity": "the same outputs scored by two rubrics",
    "protocol_sensitivity": "verdicts that depend on the protocol cell",
    "counterfactual": "counterfactual role-assignment probe",
}
# what each protocol needs, for "not evaluated" statements
PROTOCOL_TABLES = {
    "bbq": ("bbq",),
    "consistency": ("consistency", "consistency_items"),
    "generative": ("generative_by_slice", "generative_by_slice_family",
                   "generative_by_slice_decoding", "generative_summary"),
    "scorer_sensitivity": ("scorer_sensitivity",),
    "protocol_sensitivity": ("protocol_sensitivity",),
    "counterfactual": ("counterfactual",),
}
NOT_RUN_WHY = {
    "bbq": "the run has no BBQ tables: the intersectional BBQ audit was not run",
    "consistency": "the run has no consistency tables: no item was asked repeatedly",
    "generative": "the run has no generative tables: the generative audit was not run",
    "scorer_sensitivity": "outputs were scored with one rubric only",
    "protocol_sensitivity": "no protocol-sensitivity analysis in the run",
    "counterfactual": "the counterfactual probe was not run",
}
RETENTION = "kept-and-scored"
SURFACE_BY_BACKEND = {"transformers": "base-model", "embedded": "base-model",
                      "litellm": "served-system"}
HIST_EDGES = [float(x) for x in range(0, 101, 10)]
COMPARED_TEXT = {"value": "point estimate", "ci_low": "CI lower bound", "ci_high": "CI upper bound"}


# ----------------------------------------------------------------------------- user YAML

def load_user_yaml(path: str | Path) -> dict:
    """Read and check a user YAML: only the fields of ``user_fields.yaml`` are
    allowed (anything else is a typo or an attempt to overwrite a measured value);
    dates become ISO strings. Errors name the file, line and key."""
    data, text = read_yaml(path)
    if data is None:
        return {}
    lines = line_index(text)
    check_user_keys(data, source=str(path), lines=lines)
    return clean(data)


def check_user_keys(user: Any, source: str | None = None,
                    lines: dict[str, int] | None = None) -> None:
    """Only the fields of ``user_fields.yaml``; every problem at once (fairness_tests.validate)."""
    from ..validate import check_data
    from .schema import user_yaml_schema
    check_data(user, user_yaml_schema(), source=source, lines=lines)


def _set(d: dict, path: str, value: Any) -> None:
    parts = path.split(".")
    for part in parts[:-1]:
        d = d.setdefault(part, {})
    d[parts[-1]] = value


def _present(v: Any) -> bool:
    return v is not None and v != "" and v != {}


# ----------------------------------------------------------------------------- filling

def fill_card(run: RunResult, user: dict | None = None, user_source: str | None = None) -> dict:
    """The card dict for ``run`` (+ the user's fields). Deterministic."""
    user = copy.deepcopy(user or {})
    check_user_keys(user, source=user_source)
    user = clean(user)
    meta = normalise_metadata(clean(run.metadata or {}))
    tables = {k: v for k, v in (run.tables or {}).items() if v is not None}
    verdicts = run.verdicts if run.verdicts is not None else pd.DataFrame()
    missing_run: list[tuple[str, str, str]] = []   # (field, section, hint)

    card: dict[str, Any] = {
        "card_version": CARD_VERSION,
        "modality": "text",
        "generator": {"name": "fairness_tests",
                      "version": str(meta.get("fairness_tests_version") or __version__)},
    }
    date = _iso_date(meta.get("evaluation_date"))
    if date:
        card["evaluation_date"] = date
    else:
        missing_run.append(("evaluation_date", "identification", "run metadata 'evaluation_date'"))

    card["system"] = _system(meta, user, missing_run, user_source)
    surface = card["system"].get("surface")
    gen = meta.get("generative") or {}
    bbq = meta.get("bbq") or {}
    has_gen = any(t in tables for t in PROTOCOL_TABLES["generative"]) or bool(gen)
    has_bbq = "bbq" in tables or bool(bbq)

    addendum = dict(user.get("served_system_addendum") or {})
    if gen.get("system_prompt") is not None:
        addendum["system_prompt"] = str(gen["system_prompt"])
    if meta.get("chat_template"):
        addendum["chat_template"] = str(meta["chat_template"])
    if addendum:
        card["served_system_addendum"] = addendum

    for key in ("authors", "intended_use", "fairness_scope", "mitigations", "governance"):
        if _present(user.get(key)):
            card[key] = user[key]

    card["protected_attributes"] = _protected_attributes(gen, bbq, tables, user, missing_run)
    card["prompt_suite"] = _prompt_suite(gen, bbq, has_gen, has_bbq, missing_run)
    card["decoding"] = _decoding(gen, bbq, has_gen, has_bbq, missing_run)
    card["refusal_handling"] = _refusal_handling(gen, has_gen, has_bbq)
    card["scorer"] = _scorer(gen, bbq, has_gen, has_bbq, tables, verdicts)
    card["evaluation_protocol"] = _evaluation_protocol(meta, gen, bbq, tables, verdicts)
    card["metrics"] = _metrics(tables, verdicts)
    card["decision_rules"] = _decision_rules(verdicts)
    card["verdicts"] = _verdict_rows(verdicts)
    card["results"] = _results(tables, verdicts)
    card["reproducibility"] = _reproducibility(meta, gen, bbq, user)

    # required fields nobody supplied -> missing_fields (never invented)
    missing = []
    sections = {f["path"]: f for f in user_fields()["fields"]}
    for path, f in sections.items():
        req = f.get("required")
        if req is True or (req == "served-system" and surface == "served-system"):
            if not _present(_get(card, path)):
                missing.append({"field": path, "section": f["section"], "source": "user",
                                "hint": f.get("hint", "")})
    for path, section, hint in missing_run:
        missing.append({"field": path, "section": section, "source": "run", "hint": hint})
    card["missing_fields"] = sorted(missing, key=lambda m: (m["source"], m["field"]))
    return _sort_keys(clean(card))


def _sort_keys(x: Any) -> Any:
    """Key-sorted dicts all the way down: the card in memory is the card read back from
    its YAML (dumped with sorted keys), so rendering either gives the same bytes."""
    if isinstance(x, dict):
        return {k: _sort_keys(x[k]) for k in sorted(x)}
    if isinstance(x, list):
        return [_sort_keys(v) for v in x]
    return x


ROTATION_COUNT = {"none": 1, "sample": 1, "all": 3}


def normalise_metadata(meta: dict) -> dict:
    """Accept the shapes fairness_tests.audit records (and the documented ones):
    bbq.data {directory, sha256}, bbq.bootstrap.resamples, rotations "none|sample|all",
    generative.insertion / attributes / families[].paraphrases {pid: text},
    max_new_tokens as a list, decoding_regimes [(t, p)], thresholds as a list,
    config.seed, backend_info.version, probe -> counterfactual."""
    meta = copy.deepcopy(meta)
    cfg = meta.get("config") or {}
    bbq = meta.get("bbq")
    if isinstance(bbq, dict):
        data = bbq.get("data") or {}
        if isinstance(data, dict):
            bbq.setdefault("data_dir", data.get("directory"))
            if data.get("sha256"):
                bbq.setdefault("sha256", data["sha256"])
        boot = bbq.get("bootstrap")
        if isinstance(boot, dict) and "resamples" in boot:
            boot.setdefault("n_boot", boot["resamples"])
        if bbq.get("seed") is None and cfg.get("seed") is not None:
            bbq["seed"] = cfg["seed"]
        rot = bbq.get("rotations")
        if isinstance(rot, str):
            bbq["rotations_mode"] = rot
            bbq["rotations"] = ROTATION_COUNT.get(rot, 1)
        cs = bbq.get("consistency_sample")
        if isinstance(cs, dict) and "consistency" not in bbq:
            bbq["consistency"] = {"n_items": cs.get("n_items"), "repeats": bbq.get("repeats"),
                                  "seed": cs.get("seed"), "per_cell": cs.get("per_cell")}
        if bbq.get("prompt") and not bbq.get("prompt_description"):
            bbq["prompt_description"] = bbq["prompt"]
        for k in [k for k, v in bbq.items() if v is None]:
            del bbq[k]
    gen = meta.get("generative")
    if isinstance(gen, dict):
        if gen.get("insertion") and not gen.get("insertion_rule"):
            gen["insertion_rule"] = gen["insertion"]
        attrs = gen.get("attributes")
        if isinstance(attrs, dict) and attrs and not gen.get("slices"):
            import itertools

            names = list(attrs)
            gen["slices"] = [dict(zip(names, combo)) for combo in
                             itertools.product(*(attrs[n] for n in names))]
        fams = gen.get("families")
        if isinstance(fams, list):
            for f in fams:
                if isinstance(f, dict) and isinstance(f.get("paraphrases"), dict):
                    f["paraphrases"] = [str(f["paraphrases"][k]) for k in sorted(f["paraphrases"])]
        mnt = gen.get("max_new_tokens")
        if isinstance(mnt, list):
            gen["max_new_tokens"] = max(mnt) if mnt else None
        if not gen.get("decoding") and gen.get("decoding_regimes"):
            gen["decoding"] = [{"temperature": t, "top_p": p} for t, p in gen["decoding_regimes"]]
    th = meta.get("thresholds")
    if isinstance(th, list):
        meta["thresholds"] = {"files": [str(x) for x in th]}
    info = meta.get("backend_info")
    if isinstance(info, dict) and not meta.get("backend_version"):
        v = info.get("version") or info.get("backend_version")
        if v:
            meta["backend_version"] = str(v)
    if meta.get("probe") and not meta.get("counterfactual"):
        meta["counterfactual"] = meta["probe"]
    return meta


def _bbq_template() -> str | None:
    """The BBQ prompt as the package builds it, with placeholders (fallback when the
    run did not record its template)."""
    try:
        from ..protocols.bbq.prompt import prompt_text
    except ImportError:
        return None
    return prompt_text("{context}", "{question}", ["{ans0}", "{ans1}", "{ans2}"])


def _iso_date(x: Any) -> str | None:
    if not x:
        return None
    s = str(x)[:10]
    try:
        _dt.date.fromisoformat(s)
    except ValueError:
        return None
    return s


def _system(meta: dict, user: dict, missing_run: list, user_source: str | None) -> dict:
    u = dict(user.get("system") or {})
    system: dict[str, Any] = {}
    if meta.get("model"):
        system["name"] = str(meta["model"])
    else:
        missing_run.append(("system.name", "identification", "run metadata 'model'"))
    for key in ("backend", "backend_version", "recorded_backend"):
        if meta.get(key):
            system[key] = str(meta[key])
    # fields the run may know; the user fills them when the run did not
    for key, meta_key in (("version", "model_version"), ("snapshot_date", "snapshot_date")):
        run_value = meta.get(meta_key)
        if run_value not in (None, ""):
            if key in u and str(u[key]) != str(run_value):
                raise ConfigError(f"contradicts the run's value {run_value!r} "
                                  f"(run metadata {meta_key!r})", path=user_source,
                                  key=f"system.{key}")
            system[key] = str(run_value)
        elif key in u:
            system[key] = str(u[key])
    backend = meta.get("recorded_backend") or meta.get("backend")
    if "surface" in u:
        system["surface"] = u["surface"]
        system["surface_source"] = "user"
    elif backend in SURFACE_BY_BACKEND:
        system["surface"] = SURFACE_BY_BACKEND[backend]
        system["surface_source"] = "run"
    for key in ("known_layers", "checkpoint_url", "precision", "notes"):
        if key in u:
            system[key] = u[key]
    return system


def _as_list_of_dicts(x: Any, key: str = "id") -> list[dict]:
    """Accept [{...}], {id: {...}} or [str] and return [{id: ..., ...}]."""
    if not x:
        return []
    if isinstance(x, dict):
        return [{key: k, **(v if isinstance(v, dict) else {"value": v})} for k, v in x.items()]
    out = []
    for v in x:
        out.append(dict(v) if isinstance(v, dict) else {key: v})
    return out


def _slice_label(s: dict) -> str:
    if s.get("id"):
        return str(s["id"])
    return "_".join(str(v) for k, v in s.items() if k not in ("text", "id"))


def _protected_attributes(gen: dict, bbq: dict, tables: dict, user: dict,
                          missing_run: list) -> dict:
    slices: list[dict] = []
    ops: list[str] = []
    for s in _as_list_of_dicts(gen.get("slices")):
        attrs = {k: str(v) for k, v in s.items() if k not in ("id", "text") and v is not None}
        if not attrs and s.get("id"):
            parts = str(s["id"]).split("_")
            attrs = ({"gender": parts[0], "religion": parts[1]} if len(parts) == 2
                     else {"slice": str(s["id"])})
        slices.append({"protocol": "generative", **attrs})
    if not slices and "generative_by_slice" in tables and "slice" in tables["generative_by_slice"]:
        for sid in sorted(tables["generative_by_slice"]["slice"].astype(str).unique()):
            slices.append({"protocol": "generative", "slice": sid})
    if slices or gen:
        rule = gen.get("insertion_rule")
        if rule:
            ops.append(f"Generative audit: the attributes appear verbatim in the prompt, "
                       f"inserted as {rule!r}; no post-hoc demographic inference.")
        else:
            ops.append("Generative audit: the attributes appear verbatim in the prompt "
                       "(insertion rule not recorded by the run).")
            missing_run.append(("prompt_suite.attribute_insertion_rule", "protected_attributes",
                                "run metadata generative.insertion_rule"))
    groups = tables.get("bbq_groups")
    if groups is not None and "group" in groups.columns:
        cols = [c for c in ("dataset", "group") if c in groups.columns]
        for key in sorted(set(map(tuple, groups[cols].astype(str).to_numpy().tolist()))):
            slices.append({"protocol": "bbq", **dict(zip(cols, key))})
    if "bbq" in tables or bbq:
        filt = bbq.get("filter", "not recorded")
        ops.append("Intersectional BBQ: the group is the intersectional identity (race x gender "
                   "or race x SES) of the item's stereotyped individual, parsed from BBQ's "
                   f"answer_info tags (e.g. 'F-Black' -> Black, F); item filter: {filt}.")
    pa: dict[str, Any] = {"slices": slices}
    if ops:
        pa["operationalisation"] = " ".join(ops)
    else:
        missing_run.append(("protected_attributes.operationalisation", "protected_attributes",
                            "no protocol in the run"))
    notes = _get(user, "protected_attributes.notes")
    if notes:
        pa["notes"] = notes
    return pa


def _families(gen: dict) -> list[dict]:
    fams = _as_list_of_dicts(gen.get("families"))
    paras = gen.get("paraphrases")
    out = []
    for f in fams:
        fam = {"id": str(f.get("id", "")), "name": str(f.get("name") or f.get("id", ""))}
        if f.get("description"):
            fam["description"] = str(f["description"])
        p = f.get("paraphrases")
        if p is None and isinstance(paras, dict):
            p = paras.get(fam["id"])
        if isinstance(p, list):
            fam["paraphrases"] = [str(x) for x in p]
        template = f.get("template") or (fam.get("paraphrases") or [None])[0]
        if template:
            fam["template"] = str(template)
        out.append(fam)
    return out


def _prompt_suite(gen: dict, bbq: dict, has_gen: bool, has_bbq: bool, missing_run: list) -> dict:
    suite: dict[str, Any] = {"families": []}
    total = 0
    if has_gen:
        if gen.get("suite"):
            suite["suite_name"] = str(gen["suite"])
        if gen.get("suite_hash"):
            suite["suite_hash"] = str(gen["suite_hash"])
        else:
            missing_run.append(("prompt_suite.suite_hash", "evaluation_protocol",
                                "run metadata generative.suite_hash"))
        fams = _families(gen)
        for i, f in enumerate(fams):
            if "template" not in f:
                missing_run.append((f"prompt_suite.families[{i}].template", "evaluation_protocol",
                                    "run metadata generative.families[].template"))
        suite["families"].extend(fams)
        if gen.get("occupations"):
            suite["occupations"] = [str(o) for o in gen["occupations"]]
        if gen.get("insertion_rule"):
            suite["attribute_insertion_rule"] = str(gen["insertion_rule"])
        n_par = gen.get("paraphrases")
        n_unique = None
        if isinstance(n_par, int) and fams and gen.get("occupations") and gen.get("slices"):
            n_unique = len(fams) * n_par * len(gen["occupations"]) * len(gen["slices"])
        elif fams and all("paraphrases" in f for f in fams) and gen.get("occupations") \
                and gen.get("slices"):
            n_unique = (sum(len(f["paraphrases"]) for f in fams) * len(gen["occupations"])
                        * len(gen["slices"]))
        if n_unique:
            total += n_unique
    if has_bbq:
        i = len(suite["families"])
        fam = {"id": "BBQ", "name": "BBQ zero-shot multiple choice",
               "description": "Context, question and three options labelled (a) (b) (c); the "
                              "model is told to answer with one letter; the correct answer is "
                              "never shown."}
        if bbq.get("prompt_description"):
            fam["description"] = str(bbq["prompt_description"])
        template = bbq.get("prompt_template") or _bbq_template()
        if template:
            fam["template"] = str(template)
        else:
            missing_run.append((f"prompt_suite.families[{i}].template", "evaluation_protocol",
                                "run metadata bbq.prompt_template"))
        suite["families"].append(fam)
        n_items = bbq.get("n_items")
        if isinstance(n_items, dict):
            n_items = sum(v for v in n_items.values() if isinstance(v, int))
        if isinstance(n_items, int):
            total += n_items * int(bbq.get("rotations") or 1)
    if total:
        suite["total_prompts"] = total
    else:
        missing_run.append(("prompt_suite.total_prompts", "evaluation_protocol",
                            "run metadata: family/paraphrase/occupation/slice lists or bbq.n_items"))
    return suite


def _decoding(gen: dict, bbq: dict, has_gen: bool, has_bbq: bool, missing_run: list) -> dict:
    regimes = []
    if has_gen:
        for r in _as_list_of_dicts(gen.get("decoding"), key="name"):
            reg = {k: r[k] for k in ("name", "temperature", "top_p", "max_new_tokens")
                   if r.get(k) is not None}
            if "max_new_tokens" not in reg and gen.get("max_new_tokens"):
                reg["max_new_tokens"] = int(gen["max_new_tokens"])
            if "name" not in reg and "temperature" in reg:
                reg["name"] = f"t{reg['temperature']:g}_p{reg.get('top_p', 1):g}"
            reg["protocol"] = "generative"
            regimes.append(reg)
        if not regimes:
            missing_run.append(("decoding.regimes", "evaluation_protocol",
                                "run metadata generative.decoding"))
    if has_bbq:
        reg = {"name": "bbq", "protocol": "bbq"}
        for k, mk in (("temperature", "temperature"), ("top_p", "top_p"),
                      ("max_new_tokens", "max_tokens")):
            if bbq.get(mk) is not None:
                reg[k] = bbq[mk]
        for k in ("temperature", "top_p"):
            if k not in reg:
                missing_run.append((f"decoding.regimes[{len(regimes)}].{k}", "evaluation_protocol",
                                    f"run metadata bbq.{k}"))
        regimes.append(reg)
    dec: dict[str, Any] = {"regimes": regimes}
    if has_gen and gen.get("seeds"):
        dec["seeds_per_prompt"] = len(gen["seeds"])
    elif has_bbq and bbq.get("repeats"):
        dec["seeds_per_prompt"] = int(bbq["repeats"])
    dec["post_processing"] = str(gen.get("post_processing")
                                 or "Leading/trailing whitespace stripped; nothing else.")
    return dec


def _rubric_name(gen: dict) -> str | None:
    r = gen.get("rubric")
    if isinstance(r, dict):
        return str(r.get("name") or r.get("path") or "")
    return str(r) if r else None


def _refusal_handling(gen: dict, has_gen: bool, has_bbq: bool) -> dict:
    parts, defl = [], None
    if has_gen:
        rub = _rubric_name(gen) or "(not recorded)"
        parts.append(f"Generative: the output matches any refusal entry of the {rub!r} rubric "
                     "(fairness_tests/data/rubrics).")
        defl = f"Generative: the output matches any deflection entry of the {rub!r} rubric."
    if has_bbq:
        parts.append("BBQ: an answer that cannot be parsed as one of the three options is "
                     "'invalid': counted as wrong and reported as invalid_rate, never dropped or "
                     "coerced.")
    out = {"refusal_definition": " ".join(parts) or "No protocol was run.",
           "retention_policy": RETENTION}
    if defl:
        out["deflection_definition"] = defl
    return out


def _scorer(gen: dict, bbq: dict, has_gen: bool, has_bbq: bool, tables: dict,
            verdicts: pd.DataFrame) -> dict:
    sc: dict[str, Any] = {"type": "lexical-rule"}
    notes = []
    if has_gen:
        r = gen.get("rubric")
        if isinstance(r, dict):
            if r.get("path"):
                sc["patterns_file"] = str(r["path"])
            if r.get("sha256"):
                sc["patterns_sha256"] = str(r["sha256"])
        if "patterns_file" not in sc and _rubric_name(gen):
            sc["patterns_file"] = f"fairness_tests/data/rubrics ({_rubric_name(gen)})"
        notes.append(f"Generative outputs scored by the lexical rubric {_rubric_name(gen)!r}"
                     + (f" ({gen['rubric_semantics']})" if gen.get("rubric_semantics") else "")
                     + (f"; also scored by {gen['compare_rubric']!r} for scorer sensitivity"
                        if gen.get("compare_rubric") else "") + ".")
    if has_bbq:
        notes.append("BBQ answers parsed by rule ('b', '(b)', 'B.', 'Answer: b' or the option's "
                     "own text); anything else is invalid.")
    sens = tables.get("scorer_sensitivity")
    if sens is not None and len(sens):
        flips = _flip_count(sens)
        if flips is not None:
            notes.append(f"Scorer sensitivity: {flips} verdict(s) flip with the rubric.")
        sc["sensitivity"] = "results.tables.scorer_sensitivity"
    if len(verdicts):
        th = {}
        for rule, g in verdicts.groupby("rule", sort=True):
            b = g["bound"].dropna().unique()
            if len(b) == 1 and finite(b[0]) is not None:
                th[str(rule)] = float(b[0])
        if th:
            sc["thresholds"] = th
    sc["notes"] = " ".join(notes) if notes else "No protocol was run."
    return sc


def _flip_count(sens: pd.DataFrame) -> int | None:
    for col in ("flips", "verdict_flips", "flip"):
        if col in sens.columns:
            return int(pd.to_numeric(sens[col], errors="coerce").fillna(0).astype(bool).sum())
    return None


def _evaluation_protocol(meta: dict, gen: dict, bbq: dict, tables: dict,
                         verdicts: pd.DataFrame) -> dict:
    run = [p for p, ts in PROTOCOL_TABLES.items() if any(t in tables for t in ts)]
    not_run = [{"what": p, "why": NOT_RUN_WHY[p]} for p in PROTOCOL_TABLES if p not in run]
    if not len(verdicts):
        not_run.append({"what": "decision_rules",
                        "why": "the run has no verdicts: no decision rule was evaluated"})
    ep: dict[str, Any] = {"protocols_run": run, "not_evaluated": not_run}
    seeds, samples = [], []
    if bbq:
        b = {k: bbq[k] for k in ("data_dir", "filter", "n_items", "repeats", "rotations",
                                 "rotations_mode", "option_order", "temperature", "seed",
                                 "bootstrap", "answer_parser", "consistency", "n_answers",
                                 "invalid_answers", "limit") if k in bbq}
        if bbq.get("sha256"):
            b["data_sha256"] = {str(k): str(v) for k, v in sorted(bbq["sha256"].items())}
        ep["bbq"] = b
        boot = bbq.get("bootstrap") or {}
        cons = bbq.get("consistency") or {}
        mode = bbq.get("rotations_mode")
        rot = ("all three cyclic option rotations of every item" if mode == "all" else
               "all three cyclic option rotations of the consistency sample"
               if mode == "sample" else "dataset option order only")
        seeds.append(f"BBQ: answer sampling seed {bbq.get('seed', 'not recorded')}; "
                     f"bootstrap {boot.get('n_boot', '?')} resamples, seed {boot.get('seed', '?')}"
                     + (f"; consistency sample drawn with seed {cons.get('seed')}"
                        if cons.get("seed") is not None else "") + ".")
        samples.append(f"BBQ: one answer per item ({bbq.get('n_items', '?')} items)"
                       + (f"; {cons.get('repeats')} repeated answers for each of the "
                          f"{cons.get('n_items')} consistency-sample items" if cons else "")
                       + f"; {rot}.")
    if gen:
        g = {k: gen[k] for k in ("system_prompt", "n_generations", "reductions",
                                 "max_new_tokens", "n_grid_full", "n_error",
                                 "n_refused_by_provider", "compare_rubric", "refusal_handling")
             if gen.get(k) is not None}
        if gen.get("suite"):
            g["suite_name"] = str(gen["suite"])
        if gen.get("suite_hash"):
            g["suite_hash"] = str(gen["suite_hash"])
        if _rubric_name(gen):
            g["rubric"] = _rubric_name(gen)
        if gen.get("seeds"):
            g["seeds"] = [int(s) for s in gen["seeds"]]
        if isinstance(g.get("reductions"), str):
            g["reductions"] = [g["reductions"]]
        elif isinstance(g.get("reductions"), dict):
            g["reductions"] = [f"{k}: {v}" for k, v in sorted(g["reductions"].items())]
        ep["generative"] = g
        seeds.append(f"Generative: one generation per seed in {gen.get('seeds', 'not recorded')} "
                     "for every prompt x decoding regime; the seed is part of each request's key.")
        samples.append(f"Generative: {len(gen.get('seeds') or []) or 'not recorded'} sample(s) "
                       "per prompt and decoding regime.")
    if meta.get("counterfactual"):
        ep["counterfactual"] = meta["counterfactual"]
    if meta.get("thresholds"):
        th = meta["thresholds"]
        ep["thresholds"] = th if isinstance(th, dict) else {"files": [str(x) for x in th]}
    if seeds:
        ep["seed_policy"] = " ".join(seeds)
    if samples:
        ep["samples_per_prompt"] = " ".join(samples)
    return ep


def _metrics(tables: dict, verdicts: pd.DataFrame) -> list[dict]:
    defs = metric_definitions()
    names: set[str] = set()
    for name, t in tables.items():
        if name == "consistency_items":
            cols = set(t.columns)
            names |= {m for m in ("mfaa", "gtc") if m in cols}
            if "metric" in cols:
                names |= set(t["metric"].astype(str))
            continue
        if "metric" in t.columns:
            names |= set(t["metric"].dropna().astype(str))
    if len(verdicts):
        names |= set(verdicts["metric"].dropna().astype(str))
    bounds: dict[str, set] = {}
    if len(verdicts):
        for m, g in verdicts.groupby("metric", sort=True):
            bounds[str(m)] = {float(b) for b in g["bound"].dropna() if finite(b) is not None}
    out = []
    for name in sorted(names):
        d = _definition(name, defs)
        entry = {"name": name, "definition": d["definition"]}
        if d.get("unit"):
            entry["unit"] = d["unit"]
        b = bounds.get(name)
        if b and len(b) == 1:
            entry["threshold"] = next(iter(b))
        elif b:
            entry["threshold"] = "per rule: see decision_rules"
        out.append(entry)
    return out


def _definition(name: str, defs: dict) -> dict:
    if name in defs:
        return defs[name]
    for suffix, word in (("_mean", "mean"), ("_std", "standard deviation"), ("_min", "minimum"),
                         ("_max", "maximum"), ("_pct", "percentage")):
        if name.endswith(suffix) and name[: -len(suffix)] in defs:
            base = defs[name[: -len(suffix)]]
            return {"unit": base.get("unit"),
                    "definition": f"{word} over items of: {base['definition']}"}
    for prefix in ("worst_slice_", "disparity_", "rubric_delta_"):
        if name.startswith(prefix) and name[len(prefix):] in defs:
            head = defs[prefix.rstrip("_")]["definition"]
            return {"unit": defs[name[len(prefix):]].get("unit"),
                    "definition": f"{head} Metric: {defs[name[len(prefix):]]['definition']}"}
    return {"definition": "no definition shipped for this metric "
                          "(fairness_tests/data/card_schema/metric_definitions.yaml)"}


def _rule_outcome(statuses: pd.Series) -> str:
    s = set(statuses.astype(str))
    if "fail" in s and "pass" in s:
        return "mixed"
    for status in ("fail", "expected_fail", "pass"):
        if status in s:
            return status
    return "not_evaluable"


def _decision_rules(verdicts: pd.DataFrame) -> list[dict]:
    if not len(verdicts):
        return []
    out = []
    for rule, g in verdicts.groupby("rule", sort=True):
        first = g.iloc[0]
        metric, op, bound = first.get("metric"), first.get("op"), first.get("bound")
        compared = first.get("compared")
        bounds = g["bound"].dropna().unique()
        bound_txt = (f"{float(bounds[0]):g}" if len(bounds) == 1 and finite(bounds[0]) is not None
                     else "per-cell bounds")
        text = (f"{metric}: {COMPARED_TEXT.get(str(compared), str(compared))} {op} {bound_txt} "
                f"in every cell ({len(g)} cell(s)).")
        counts = {s: int((g["status"] == s).sum())
                  for s in ("pass", "fail", "not_evaluable", "expected_fail")}
        rationales = sorted({str(r) for r in g["rationale"].dropna() if str(r)})
        entry: dict[str, Any] = {
            "id": str(rule), "rule": text, "metric": str(metric),
            "outcome": _rule_outcome(g["status"]), "cells": counts,
            "failing_cells": sorted(str(c) for c in g.loc[g["status"] == "fail", "cell"]),
        }
        if rationales:
            entry["rationale"] = " ".join(rationales)
        if op in ("<=", ">="):
            entry["op"] = op
        if len(bounds) == 1 and finite(bounds[0]) is not None:
            entry["bound"] = float(bounds[0])
        if compared in COMPARED_TEXT:
            entry["compared"] = compared
        out.append(entry)
    return out


def _verdict_rows(verdicts: pd.DataFrame) -> list[dict]:
    if not len(verdicts):
        return []
    v = verdicts.sort_values(["rule", "cell"], kind="mergesort")
    rows = records(v)
    for r in rows:
        for k in ("rationale", "why"):
            if r.get(k) is None:
                r[k] = ""
        for k in ("compared", "op"):
            if r.get(k) in ("", "nan"):
                r[k] = None
        r["cell"] = "" if r.get("cell") is None else str(r["cell"])
    return rows


def _results(tables: dict, verdicts: pd.DataFrame) -> dict:
    res: dict[str, Any] = {"tables": {}}
    for name in sorted(tables):
        if name == "consistency_items":
            continue
        res["tables"][name] = records(tables[name])
    if len(verdicts):
        res["verdict_counts"] = {s: int((verdicts["status"] == s).sum())
                                 for s in ("pass", "fail", "not_evaluable", "expected_fail")}
    worst = _worst_slices(tables)
    if worst:
        res["worst_slice"] = worst
    if "consistency_items" in tables:
        dist = _consistency_distribution(tables["consistency_items"])
        if dist:
            res["consistency_distribution"] = dist
    return res


def _worst_slices(tables: dict) -> list[dict]:
    """Selection only: the row with the largest value per metric (overall, and per
    family when the slice x family table is there)."""
    out = []
    for name, scope_col in (("generative_by_slice", None), ("generative_by_slice_family", "family")):
        t = tables.get(name)
        if t is None or not {"slice", "metric", "value"} <= set(t.columns) or not len(t):
            continue
        t = t[pd.to_numeric(t["value"], errors="coerce").notna()]
        keys = ["metric"] + ([scope_col] if scope_col and scope_col in t.columns else [])
        for key, g in t.groupby(keys, sort=True):
            key = key if isinstance(key, tuple) else (key,)
            g = g.sort_values(["value", "slice"], ascending=[False, True], kind="mergesort")
            top = g.iloc[0]
            out.append(clean({"metric": str(key[0]),
                              "scope": f"family {key[1]}" if len(key) > 1 else "overall",
                              "slice": str(top["slice"]), "value": top["value"],
                              "ci_low": top.get("ci_low"), "ci_high": top.get("ci_high")}))
    return out


def _consistency_distribution(items: pd.DataFrame) -> dict:
    """Histogram (10-point bins, the last closed) of per-item MFAA% and GTC%."""
    import numpy as np

    series = {}
    if "metric" in items.columns and "value" in items.columns:
        for m in ("mfaa", "gtc"):
            sel = items.loc[items["metric"].astype(str).str.lower().isin([m, f"{m}_pct"]), "value"]
            if len(sel):
                series[m] = sel
    else:
        for m in ("mfaa", "gtc"):
            for col in (m, f"{m}_pct", m.upper()):
                if col in items.columns:
                    series[m] = items[col]
                    break
    out = {}
    for m, s in series.items():
        x = pd.to_numeric(s, errors="coerce").dropna().to_numpy(dtype=float)
        counts, _ = np.histogram(x, bins=HIST_EDGES)
        out[m] = {"bin_edges": HIST_EDGES, "counts": [int(c) for c in counts], "n": int(x.size),
                  "mean": float(x.mean()) if x.size else None}
    return out


def _reproducibility(meta: dict, gen: dict, bbq: dict, user: dict) -> dict:
    rep = {k: v for k, v in (user.get("reproducibility") or {}).items() if _present(v)}
    seeds = sorted({int(s) for s in gen.get("seeds") or []})
    if not seeds and bbq.get("seed") is not None:
        seeds = [int(bbq["seed"])]
    if seeds:
        rep["seeds"] = seeds
    total = 0
    if isinstance(gen.get("n_generations"), int):
        total += gen["n_generations"]
    n_items = bbq.get("n_items")
    if isinstance(n_items, dict):
        n_items = sum(v for v in n_items.values() if isinstance(v, int))
    if isinstance(bbq.get("n_answers"), int):
        total += bbq["n_answers"]
    elif isinstance(n_items, int):
        total += n_items * int(bbq.get("rotations") or 1)
        cons = bbq.get("consistency") or {}
        if isinstance(cons.get("n_items"), int) and isinstance(cons.get("repeats"), int):
            total += cons["n_items"] * cons["repeats"]
    if total:
        rep["total_samples"] = total
    if meta.get("regen_command"):
        rep["regen_command"] = str(meta["regen_command"])
    return rep
