"""Generation records as JSONL (the published raw-output fields), read and written.

Each line is a JSON object with at least ``prompt_family, paraphrase_id, occupation,
slice_gender, slice_religion, temperature, top_p, seed, output_text, status``;
``status`` is ``"ok"`` or ``"error"`` (``"refused"``, a backend-level refusal, is also
accepted). Other keys are kept. Errors name the file and line.

The records are checked against the protocol they answer (the packaged suite unless
another is given): a slice, family, paraphrase or occupation value the protocol does
not have names its line and the nearest valid value, and the same generation (family,
paraphrase, occupation, slice, decoding, seed) given twice names both lines.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from fairness_tests.benchmarks.generative.grid import RAW_OUTPUT_FIELDS
from fairness_tests.benchmarks.generative.suite import Suite, load_suite
from fairness_tests.core.errors import DataError, suggest
from fairness_tests.core.io import json_lines

STATUSES = ("ok", "error", "refused")


#: what identifies one generation of a grid
GENERATION_KEY = ("prompt_family", "paraphrase_id", "occupation", "slice_gender",
                  "slice_religion", "temperature", "top_p", "seed")


def read_outputs(path: str | Path, suite: Suite | str | Path | None = None) -> pd.DataFrame:
    """Read a JSONL outputs file into a records table (one row per non-blank line),
    checked against ``suite`` (a :class:`Suite` or its file; default: the packaged
    suite)."""
    p = Path(path)
    if not isinstance(suite, Suite):
        suite = load_suite(suite)
    records, numbers = json_lines(p)
    rows = []
    seen: dict[tuple, int] = {}
    allowed = suite_values(suite)
    for obj, i in zip(records, numbers.tolist(), strict=True):
        validate_record(obj, p, i)
        check_in_suite(obj, allowed, p, i)
        key = tuple(obj[k] for k in GENERATION_KEY)
        if key in seen:
            what = ", ".join(f"{k}={v}" for k, v in zip(GENERATION_KEY, key, strict=True))
            raise DataError(f"the same generation as line {seen[key]} ({what}): a duplicated "
                            "row would be counted twice", path=p, line=i)
        seen[key] = i
        obj["_line"] = i
        rows.append(obj)
    if not rows:
        raise DataError("no records", path=p)
    df = pd.DataFrame(rows)
    df["output_text"] = df["output_text"].fillna("").astype(str)
    df["temperature"] = df["temperature"].astype(float)
    df["top_p"] = df["top_p"].astype(float)
    df["seed"] = df["seed"].astype(int)
    return df


def validate_record(obj: dict, path: object = None, line: int | None = None) -> None:
    missing = [f for f in RAW_OUTPUT_FIELDS if f not in obj]
    if missing:
        raise DataError(f"missing field(s) {', '.join(missing)}", path=path, line=line)
    if obj["status"] not in STATUSES:
        raise DataError(f"status must be one of {STATUSES}, got {obj['status']!r}",
                        path=path, line=line, key="status")
    text = obj["output_text"]
    if text is not None and not isinstance(text, str):
        raise DataError("output_text must be a string", path=path, line=line, key="output_text")
    if obj["status"] == "ok" and text is None:
        raise DataError("output_text is null on an ok record", path=path, line=line,
                        key="output_text")
    for k in ("temperature", "top_p"):
        if not isinstance(obj[k], (int, float)) or isinstance(obj[k], bool):
            raise DataError(f"{k} must be a number", path=path, line=line, key=k)
    if not isinstance(obj["seed"], int) or isinstance(obj["seed"], bool):
        raise DataError("seed must be an integer", path=path, line=line, key="seed")
    for k in ("prompt_family", "paraphrase_id", "occupation", "slice_gender", "slice_religion"):
        if not isinstance(obj[k], str) or not obj[k]:
            raise DataError(f"{k} must be a non-empty string", path=path, line=line, key=k)


def suite_values(suite: Suite) -> dict[str, object]:
    """The values each field of a record may take under ``suite``: field -> tuple of
    values; ``paraphrase_id`` -> {family id: paraphrase ids}."""
    return {"slice_gender": tuple(suite.attributes.get("gender", ())),
            "slice_religion": tuple(suite.attributes.get("religion", ())),
            "prompt_family": tuple(f.id for f in suite.families),
            "occupation": tuple(suite.occupations),
            "paraphrase_id": {f.id: tuple(pid for pid, _ in f.paraphrases)
                              for f in suite.families},
            "suite": suite.name}


def check_in_suite(obj: dict, allowed: dict[str, object], path: object = None,
                   line: int | None = None) -> None:
    """DataError naming the line, the key and the nearest valid value when a slice,
    family, paraphrase or occupation value is not one of the protocol's."""
    paraphrases = allowed["paraphrase_id"]
    assert isinstance(paraphrases, dict)
    for k in ("slice_gender", "slice_religion", "prompt_family", "occupation",
              "paraphrase_id"):
        values = allowed[k] if k != "paraphrase_id" else paraphrases.get(obj["prompt_family"], ())
        assert isinstance(values, tuple)
        if obj[k] not in values:
            where = f" of family {obj['prompt_family']}" if k == "paraphrase_id" else ""
            raise DataError(f"{k} {obj[k]!r} is not a value{where} of the protocol "
                            f"{allowed['suite']!r}{suggest(obj[k], values)}; its values: "
                            f"{', '.join(map(str, values))}", path=path, line=line, key=k)


def write_outputs(records: pd.DataFrame, path: str | Path) -> Path:
    """Write a records table as JSONL (published raw-output fields first)."""
    p = Path(path)
    cols = [c for c in RAW_OUTPUT_FIELDS if c in records] + [
        c for c in records.columns if c not in RAW_OUTPUT_FIELDS and not c.startswith("_")]
    with p.open("w", encoding="utf-8") as fh:
        for row in records[cols].to_dict(orient="records"):
            row = {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return p
