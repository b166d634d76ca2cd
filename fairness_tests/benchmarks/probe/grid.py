"""The counterfactual role-assignment probe: its grid and its requests.

Probe file (packaged: ``fairness_tests/data/probes/counterfactual.json``, a copy of
the published ``fairness_cards/rubric/mistral_probe_prompts.json``): ``paraphrases``
(``{NAMES}`` placeholder), ``names`` (name orders), ``contexts`` (cue sentence or null),
``decoding`` (``{name: {temperature, top_p}}``), ``seeds``, ``labels``,
``classifier_regex``. Grid = name order x paraphrase x context x decoding x seed
(2 x 5 x 3 x 2 x 5 = 300); the prompt is the paraphrase with ``{NAMES}`` filled, then
a space and the context sentence when there is one.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from fairness_tests.core.errors import DataError, Problem, suggest
from fairness_tests.core.io import json_lines
from fairness_tests.core.paths import data_path
from fairness_tests.core.validate import load_file, nearest_line
from fairness_tests.models.requests.request import Decoding, Request, chat

PROBE_SYSTEM_PROMPT = "You are a helpful assistant."
PROBE_MAX_TOKENS = 200        # as in the published probe script
PROBE_COLUMNS = ["probe_row", "name_order", "paraphrase_id", "context", "decoding",
                 "temperature", "top_p", "seed", "prompt_text"]
_REQUIRED = ("paraphrases", "names", "contexts", "decoding", "seeds", "labels",
             "classifier_regex")


def probe_path() -> Path:
    """The packaged counterfactual probe (the published probe, verbatim)."""
    return data_path("probes", "counterfactual.json")


def load_probe(path: str | Path | None = None) -> dict[str, Any]:
    """Load and validate a probe file (schema ``data/schemas/probe.yaml`` + the checks
    below; every problem at once, naming file, line and key)."""

    raw, _ = load_file(Path(path) if path else probe_path(), "probe", checks=[_checks],
                       what="probe file")
    return raw


def _checks(raw: Any, lines: dict[str, int]) -> list[Problem]:
    """Regexes compile, classifier labels are labels, exactly two person labels."""

    out: list[Problem] = []
    if not isinstance(raw, dict) or not isinstance(raw.get("classifier_regex"), dict):
        return out
    got = raw.get("labels")
    labels = got if isinstance(got, list) else []
    for label, pats in raw["classifier_regex"].items():
        key = f"classifier_regex.{label}"
        if label not in labels:
            out.append(Problem(key, f"{label!r} is not one of the labels {labels}",
                               nearest_line(key, lines)))
        for i, pat in enumerate(pats if isinstance(pats, list) else []):
            try:
                re.compile(str(pat), re.IGNORECASE)
            except re.error as exc:
                out.append(Problem(f"{key}[{i}]", f"bad regex: {exc}",
                                   nearest_line(f"{key}[{i}]", lines)))
    persons = [lab for lab in labels if lab in raw["classifier_regex"] and lab != "refused"]
    if len(persons) != 2:
        out.append(Problem("classifier_regex", f"expected two person labels with regexes, "
                                               f"found {persons}",
                           nearest_line("classifier_regex", lines)))
    return out


def probe_grid(probe: dict[str, Any]) -> pd.DataFrame:
    """The probe's request grid, one row per generation."""
    rows = []
    for order, names in probe["names"].items():
        for pid, text in probe["paraphrases"].items():
            for ctx, sentence in probe["contexts"].items():
                prompt = text.replace("{NAMES}", names)
                if sentence:
                    prompt = f"{prompt} {sentence}"
                for dname, d in probe["decoding"].items():
                    for seed in probe["seeds"]:
                        rows.append({"name_order": order, "paraphrase_id": pid, "context": ctx,
                                     "decoding": dname, "temperature": float(d["temperature"]),
                                     "top_p": float(d["top_p"]), "seed": int(seed),
                                     "prompt_text": prompt})
    df = pd.DataFrame(rows)
    df.insert(0, "probe_row", range(1, len(df) + 1))
    return df[PROBE_COLUMNS]


def probe_requests(grid: pd.DataFrame, backend: str = "replay", model: str = "",
                   api_base: str | None = None, system_prompt: str | None = PROBE_SYSTEM_PROMPT,
                   max_tokens: int = PROBE_MAX_TOKENS) -> list[Request]:
    out = []
    for row in grid.to_dict(orient="records"):
        meta = {str(k): (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
        out.append(Request(messages=chat(system_prompt, meta["prompt_text"]),
                           decoding=Decoding(meta["temperature"], meta["top_p"], max_tokens),
                           seed=meta["seed"], backend=backend, model=model, api_base=api_base,
                           kind="generate", meta=meta))
    return out


PROBE_OUTPUT_FIELDS = ("name_order", "paraphrase_id", "context", "decoding", "seed",
                       "output_text", "status")


def read_probe_outputs(path: str | Path, probe: dict[str, Any] | None = None) -> pd.DataFrame:
    """JSONL of probe generations (fields :data:`PROBE_OUTPUT_FIELDS`), checked against
    ``probe`` (default: the packaged probe): a name order, paraphrase, context, decoding
    or seed the probe does not have names its line and the nearest valid value, and the
    same generation on two lines names both. Errors name the file and line."""

    p = Path(path)
    probe = probe if probe is not None else load_probe()
    allowed = {k: tuple(str(x) for x in probe[src]) for k, src in _PROBE_KEYS.items()}
    records, numbers = json_lines(p)
    rows = []
    seen: dict[tuple, int] = {}
    for obj, i in zip(records, numbers.tolist(), strict=True):
        missing = [f for f in PROBE_OUTPUT_FIELDS if f not in obj]
        if missing:
            raise DataError(f"missing field(s) {', '.join(missing)}", path=p, line=i)
        if obj["status"] not in ("ok", "error", "refused"):
            raise DataError(f"status must be ok|error|refused, got {obj['status']!r}",
                            path=p, line=i, key="status")
        text = obj["output_text"]
        if text is not None and not isinstance(text, str):
            raise DataError("output_text must be a string", path=p, line=i, key="output_text")
        for k, values in allowed.items():
            v = obj[k]
            if isinstance(v, bool) or str(v) not in values:
                raise DataError(f"{k} {v!r} is not a value of the probe"
                                f"{suggest(str(v), values)}; its values: {', '.join(values)}",
                                path=p, line=i, key=k)
        key = tuple(str(obj[k]) for k in allowed)
        if key in seen:
            raise DataError(f"the same generation as line {seen[key]} ("
                            + ", ".join(f"{k}={v}" for k, v in zip(allowed, key, strict=True))
                            + "): a duplicated row would be counted twice", path=p, line=i)
        seen[key] = i
        rows.append(obj)
    if not rows:
        raise DataError("no records", path=p)
    df = pd.DataFrame(rows)
    df["output_text"] = df["output_text"].fillna("").astype(str)
    return df


#: a probe output's field -> the probe key listing its values
_PROBE_KEYS = {"name_order": "names", "paraphrase_id": "paraphrases", "context": "contexts",
               "decoding": "decoding", "seed": "seeds"}
