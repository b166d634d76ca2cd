"""CrowS-Pairs data: the authors' ``crows_pairs_anonymized.csv`` (nyu-mll/crows-pairs at
:data:`COMMIT`), read byte for byte, checked against the recorded sha256.

The file is a CSV with a header ``,sent_more,sent_less,stereo_antistereo,bias_type,
annotations,anon_writer,anon_annotators``: the first (unnamed) column is the pair's id
(0..1507). ``sent_more`` is the more stereotypical sentence of the pair and ``sent_less``
the less stereotypical one, whichever of them the writer wrote (``stereo_antistereo``:
``stereo`` when the writer's sentence demonstrates a stereotype, ``antistereo`` when it
violates one; in both cases ``sent_more`` is the more stereotypical: the authors'
``metric.py`` and lm-evaluation-harness both score "ll(sent_more) > ll(sent_less)").
Read with the standard ``csv`` module (no NA conversion: every field stays the text it is).
"""
from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

from fairness_tests.core.errors import ConfigError
from fairness_tests.core.paths import benchmark_data_dir
from fairness_tests.core.sources import DataSource

NAME = "crows_pairs"
REPO = "nyu-mll/crows-pairs"
COMMIT = "8aaac11c485473159ec9328a65253a5be9a479dc"
CSV_NAME = "crows_pairs_anonymized.csv"
CSV_PATH = f"data/{CSV_NAME}"
CSV_SHA256 = "dfb36986ce0502abbaf7055b9176da3d08d48e07df1251991b5dfbcbceab9d0c"
README_PATH = "README.md"
README_SHA256 = "bf96decb803c46ae0cf5ae065ac374ccead2bff74c62a258621ffbed5db1925b"
LICENCE = "CC BY-SA 4.0"

SOURCE = DataSource(repo=REPO, commit=COMMIT,
                    files={CSV_PATH: CSV_SHA256, README_PATH: README_SHA256},
                    dest=NAME, licence=LICENCE, local={README_PATH: "UPSTREAM_README.md"})

#: the nine bias types, largest first (the paper's Table 1 counts: 1,508 pairs)
BIAS_TYPES = ("race-color", "gender", "socioeconomic", "nationality", "religion", "age",
              "sexual-orientation", "physical-appearance", "disability")
PAPER_COUNTS = {"race-color": 516, "gender": 262, "socioeconomic": 172, "nationality": 159,
                "religion": 105, "age": 87, "sexual-orientation": 84,
                "physical-appearance": 63, "disability": 60}
DIRECTIONS = ("stereo", "antistereo")
HEADER = ("", "sent_more", "sent_less", "stereo_antistereo", "bias_type", "annotations",
          "anon_writer", "anon_annotators")

#: the authors' data-reliability warning (their README), carried to every report
WARNING = ("CrowS-Pairs authors' warning: Blodgett et al. (2021) found significant issues "
           "with noise and reliability of the data in CrowS-Pairs; the problems are "
           "significant enough that CrowS-Pairs may not be a good indicator of the presence "
           "of social biases in LMs (the authors' README, nyu-mll/crows-pairs).")
#: how the benchmark is adapted to a causal model, said on the card
ADAPTATION = ("CrowS-Pairs' metric was defined for masked language models (pseudo-log-"
              "likelihood of the shared tokens); for a causal model this is "
              "lm-evaluation-harness's crows_pairs_english adaptation: the log-likelihood of "
              "each full sentence after the BOS token (empty context).")


@dataclass(frozen=True)
class Pair:
    """One CrowS-Pairs pair, as the file gives it."""
    pair_id: int
    sent_more: str
    sent_less: str
    stereo_antistereo: str
    bias_type: str


@dataclass(frozen=True)
class CrowsData:
    """The pairs read, where from, the file's sha256 and whether it is the release's."""
    pairs: tuple[Pair, ...]
    path: Path
    sha256: str

    @property
    def official(self) -> bool:
        return self.sha256 == CSV_SHA256

    @property
    def release(self) -> str:
        return "official release" if self.official else "not the official release"


def parse(text: str, path: str | Path = CSV_NAME) -> tuple[Pair, ...]:
    """The pairs of the CSV ``text``; a ``ConfigError`` naming the file, line and field of
    the first problem (a wrong header, an unknown bias type or direction, an empty
    sentence, a pair id that is not an integer or repeats)."""
    rows = csv.reader(io.StringIO(text, newline=""))
    header = next(rows, None)
    if header is None or tuple(header) != HEADER:
        raise ConfigError(f"{path}:1: header {header!r} is not CrowS-Pairs' {list(HEADER)!r}")
    out: list[Pair] = []
    seen: set[int] = set()
    for row in rows:
        line = rows.line_num
        if len(row) != len(HEADER):
            raise ConfigError(f"{path}:{line}: {len(row)} fields, expected {len(HEADER)}")
        out.append(_pair(dict(zip(HEADER, row, strict=True)), f"{path}:{line}", seen))
    return tuple(out)


def _pair(f: dict[str, str], at: str, seen: set[int]) -> Pair:
    """One row's pair, checked field by field."""
    if not f[""].isdigit() or int(f[""]) in seen:
        raise ConfigError(f"{at}: field '' (pair id) {f['']!r} is not a new integer id")
    if f["bias_type"] not in BIAS_TYPES:
        raise ConfigError(f"{at}: field bias_type {f['bias_type']!r} is none of "
                          f"{', '.join(BIAS_TYPES)}")
    if f["stereo_antistereo"] not in DIRECTIONS:
        raise ConfigError(f"{at}: field stereo_antistereo {f['stereo_antistereo']!r} is "
                          "neither stereo nor antistereo")
    for col in ("sent_more", "sent_less"):
        if not f[col]:
            raise ConfigError(f"{at}: field {col} is empty")
    seen.add(int(f[""]))
    return Pair(int(f[""]), f["sent_more"], f["sent_less"], f["stereo_antistereo"],
                f["bias_type"])


def load(directory: str | Path | None = None) -> CrowsData:
    """The pairs of ``<directory>/crows_pairs_anonymized.csv`` (default: the benchmark's
    data directory, :func:`fairness_tests.core.paths.benchmark_data_dir`)."""
    path = benchmark_data_dir(NAME, directory) / CSV_NAME
    if not path.is_file():
        raise ConfigError(f"CrowS-Pairs data not found: {path} (set FAIRNESS_CROWS_PAIRS_DIR, "
                          f"or fetch {REPO}@{COMMIT[:12]} {CSV_PATH})")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 (byte {exc.start})") from None
    return CrowsData(parse(text, path), path, hashlib.sha256(raw).hexdigest())


def limited(pairs: tuple[Pair, ...], limit: int | None) -> tuple[Pair, ...]:
    """At most ``limit`` pairs per bias type, the first in file order (all when None/0),
    in file order."""
    if not limit:
        return pairs
    taken: dict[str, int] = {}
    out = []
    for p in pairs:
        if taken.get(p.bias_type, 0) < limit:
            taken[p.bias_type] = taken.get(p.bias_type, 0) + 1
            out.append(p)
    return tuple(out)
