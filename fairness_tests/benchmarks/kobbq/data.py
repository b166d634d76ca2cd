"""KoBBQ's files as the authors publish them (naver-ai/KoBBQ at :data:`COMMIT`): the test
split ``KoBBQ_test_samples.tsv`` (2,280 samples, 12 categories) and the five evaluation
prompts ``0_evaluation_prompts.tsv``, read byte for byte from a directory (default
:func:`fairness_tests.core.paths.benchmark_data_dir` ``("kobbq")``: ``$FAIRNESS_KOBBQ_DIR``
or ``<shared>/benchmarks/kobbq``), each file's sha256 compared with the recorded one
("official" or "not the official release").

A sample id reads ``{category}-{template}{a|b|c|d}-{sample}-{amb|dis}-{bsd|cnt}``
(the authors' data README): ``a``/``c`` counter-biased and ``b``/``d`` biased contexts,
``bsd``/``cnt`` the biased / counter-biased question. The template id is the authors'
``sample_id_to_template_id`` (evaluation/5_evaluation.py): ``{category}-{template}``.
``choices`` is the authors' Python list literal of three answer texts (read with
:func:`ast.literal_eval`, the authors ``eval`` it); the unknown answer is
:data:`UNKNOWN` (``알 수 없음``), which each prompt replaces by its own expression.
"""
from __future__ import annotations

import ast
import csv
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from fairness_tests.core.errors import DataError
from fairness_tests.core.paths import benchmark_data_dir
from fairness_tests.core.sources import DataSource

REPO = "naver-ai/KoBBQ"
COMMIT = "0dd165aeaaacd1bd46c63513a9b2e9875eb6dce7"
SAMPLES = "KoBBQ_test_samples.tsv"
PROMPTS = "0_evaluation_prompts.tsv"
#: {path in the repository: sha256 of the file at COMMIT}
FILES = {
    "data/KoBBQ_test_samples.tsv":
        "6eacb1c0ff995c74b26183d368c500193454b7bf96a2a0f9462641e57972aab7",
    "evaluation/0_evaluation_prompts.tsv":
        "1757448babb55bfc01dce7233f64c2188ad06843646f75b6c590bff633d88bca",
    "data/KoBBQ_templates.tsv":
        "5536ec18433d4a75b0087c1b1a3ed225e0ac068cd66d3f80de051c366036cc1f",
    "LICENSE": "a09774bc173cad4312010ebabf3bac57ad88c1ed99fde5c204d61f40dec48e64",
    "README.md": "d2738975338453bef2534c3d80248c5e32c8a26ed296b435faf31c551b3ba948",
    "data/README.md": "55312e78c1420aed113812d094235e7aa6b1fe26165ac039b36fbbd4acc01313",
}
SOURCE = DataSource(repo=REPO, commit=COMMIT, files=FILES, dest="kobbq", licence="MIT",
                    local={"README.md": "UPSTREAM_README.md",
                           "data/README.md": "UPSTREAM_DATA_README.md"})
SHA256 = {SOURCE.local_name(p): d for p, d in FILES.items()}
UNKNOWN = "알 수 없음"
#: the authors' warning a report carries (UPSTREAM_DATA_README.md)
WARNINGS = ("the English translations in the KoBBQ files were machine-generated (the "
            "authors' data README); the evaluation uses the Korean text only",)
SAMPLE_COLUMNS = ["sample_id", "label_annotation", "context", "question", "choices",
                  "biased_answer", "answer", "bbq_id", "bbq_category", "prediction"]
PROMPT_COLUMNS = ["prompt_id", "prompt", "instruction", "context", "question", "a", "b", "c",
                  "answer", "unknown"]
CONTEXT_LETTERS = {"a": "counterb", "c": "counterb", "b": "biased", "d": "biased"}


@dataclass(frozen=True)
class KoBBQData:
    """The samples (one row each, parsed columns added), the prompts, where they were read
    and ``{file: sha256}`` / ``{file: "official" | "not the official release"}``."""
    samples: pd.DataFrame
    prompts: pd.DataFrame
    directory: Path
    sha256: dict[str, str]
    release: dict[str, str]


def release_of(name: str, digest: str) -> str:
    """``"official"`` when ``digest`` is the recorded sha256 of ``name`` at COMMIT."""
    return "official" if SHA256.get(name) == digest else "not the official release"


def _read(path: Path) -> tuple[str, str]:
    """(text, sha256) of a UTF-8 file; missing: one line naming ``data fetch``."""
    if not path.is_file():
        raise DataError(f"KoBBQ file not found (run `fairness-tests data fetch` or set "
                        f"$FAIRNESS_KOBBQ_DIR; authors' repository {REPO} @ {COMMIT[:12]})",
                        path)
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8"), hashlib.sha256(raw).hexdigest()
    except UnicodeDecodeError as e:
        raise DataError(f"not UTF-8 ({e.reason} at byte {e.start})", path) from None


def read_tsv(text: str, path: Path, columns: list[str]) -> pd.DataFrame:
    """The rows of a tab-separated file whose header holds ``columns`` (as strings; an
    empty field is ""); a short row or a missing column names the file and line."""
    rows = list(csv.reader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows:
        raise DataError("empty file", path)
    header = rows[0]
    missing = [c for c in columns if c not in header]
    if missing:
        raise DataError(f"missing column(s) {', '.join(missing)}", path, 1)
    for i, r in enumerate(rows[1:], start=2):
        if len(r) != len(header):
            raise DataError(f"{len(r)} fields, the header has {len(header)}", path, i)
    return pd.DataFrame(rows[1:], columns=header)[columns]


def parse_sample_id(sample_id: str, path: Path, line: int) -> dict[str, str]:
    """The parts of a sample id (see the module docstring)."""
    parts = sample_id.split("-")
    if len(parts) != 5 or parts[3] not in ("amb", "dis") or parts[4] not in ("bsd", "cnt") \
            or not parts[1] or parts[1][-1] not in CONTEXT_LETTERS:
        raise DataError(f"sample_id {sample_id!r} is not category-templateX-n-amb|dis-bsd|cnt",
                        path, line, "sample_id")
    cat, ident, _, amb_dis, qtype = parts
    ctype = "amb" if amb_dis == "amb" else f"dis-{CONTEXT_LETTERS[ident[-1]]}"
    return {"category": cat, "template_id": f"{cat}-{ident[:-1]}", "context_kind": amb_dis,
            "question_type": qtype, "ab": ident[-1], "context_type": ctype}


def parse_samples(df: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Parsed columns added: ``choices`` as a 3-tuple, the sample-id parts; each answer and
    biased answer must be one of the choices."""
    out, parsed = df.copy(), []
    choices = []
    for i, r in enumerate(df.itertuples(index=False), start=2):
        try:
            c = ast.literal_eval(str(r.choices))
        except (ValueError, SyntaxError):
            raise DataError(f"choices {r.choices!r} is not a list literal", path, i,
                            "choices") from None
        if not isinstance(c, list) or len(c) != 3 or not all(isinstance(x, str) for x in c):
            raise DataError("choices must list three texts", path, i, "choices")
        for key in ("answer", "biased_answer"):
            if getattr(r, key) not in c:
                raise DataError(f"{key} {getattr(r, key)!r} is not one of the choices",
                                path, i, key)
        choices.append(tuple(c))
        parsed.append(parse_sample_id(str(r.sample_id), path, i))
    out["choices"] = choices
    extra = pd.DataFrame(parsed, index=out.index)
    return pd.concat([out, extra], axis=1)


def load(directory: str | Path | None = None) -> KoBBQData:
    """The test samples and the prompts from ``directory`` (default: the data dir)."""
    d = benchmark_data_dir("kobbq", directory)
    s_text, s_sha = _read(d / SAMPLES)
    p_text, p_sha = _read(d / PROMPTS)
    samples = parse_samples(read_tsv(s_text, d / SAMPLES, SAMPLE_COLUMNS), d / SAMPLES)
    if samples["sample_id"].duplicated().any():
        dup = samples.loc[samples["sample_id"].duplicated(), "sample_id"].iloc[0]
        raise DataError(f"sample_id {dup!r} appears twice", d / SAMPLES, key="sample_id")
    prompts = read_tsv(p_text, d / PROMPTS, PROMPT_COLUMNS)
    prompts["prompt_id"] = prompts["prompt_id"].astype(int)
    sha = {SAMPLES: s_sha, PROMPTS: p_sha}
    return KoBBQData(samples, prompts, d, sha, {k: release_of(k, v) for k, v in sha.items()})
