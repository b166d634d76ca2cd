"""WinoBias (Zhao et al., NAACL 2018) read from the authors' files, byte for byte.

The release (uclanlp/corefBias @ :data:`COMMIT`, ``WinoBias/wino/data``): eight sentence
files ``{pro,anti}_stereotyped_type{1,2}.txt.{dev,test}`` of 396 lines each, and the two
occupation lists ``male_occupations.txt`` / ``female_occupations.txt`` (20 each). A line is
``<n> <sentence>``, ``n`` = 1..396 its line number. Brackets mark the mentions (the
authors' README): the first bracket holds the gold antecedent (one occupation, with its
article as the authors wrote it: ``[The developer]``, ``[the clerk]``, ``[an assistant]``,
``[housekeeper]``), every later bracket holds a pronoun coreferent with it; the FIRST
bracketed pronoun is the one asked about. The other occupation of the sentence (the
distractor) is not bracketed: it is the other of the sentence's first two occupation
mentions (longest match of the two lists, whole words, case-insensitive; type 2 dev line
72 mentions a third, "the manager", after the two: it is not a candidate).

One row per sentence (:data:`ITEM_COLUMNS`): ``split`` (dev, test), ``type`` (type1,
type2), ``stereotype`` (pro, anti), ``line``, ``item_id`` (``type1/dev/pro/001``), ``pair``
(the template, below), ``sentence`` (the line without its number and brackets, the
authors' tokenisation kept: ``farmer 's``), ``first``/``second`` (the two candidate
occupations in sentence order, as written), ``gold`` (the bracketed one), ``pronoun`` (as
written), ``pronoun_gender`` (male: he/his/him/himself; female: she/her/herself),
``gold_gender`` (the list the gold occupation is on).

Pairs (the template, the default cluster): the pro sentence of line ``i`` and the anti
sentence of line ``i`` of the same type and split are twins when they have the same gold
occupation and the same distractor and their pronouns' genders differ; then both get the
pair key ``type1/dev/001``. This holds on 1,582 of the 1,584 line pairs of the release
(checked by the tests); where it does not (type 2 test lines 382 and 384: the two files
hold different templates at those lines), a sentence is paired with the sentence of the
other file of its type and split that has the same text once brackets are dropped and
every gendered pronoun is replaced by one placeholder, and the same gold occupation
(key ``type2/test/<pro line>``), and a sentence without such a twin is its own cluster
(key ``type2/test/pro382``).
"""
from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from fairness_tests.core.errors import DataError
from fairness_tests.core.paths import benchmark_data_dir
from fairness_tests.core.sources import DataSource

NAME = "winobias"
REPO = "uclanlp/corefBias"
COMMIT = "0bce984dd081bbc10b0622f326727a024c607895"
PREFIX = "WinoBias/wino/data/"
LICENCE = "MIT"
SPLITS = ("dev", "test")
TYPES = ("type1", "type2")
STEREOTYPES = ("pro", "anti")
LINES_PER_FILE = 396
MALE_FILE, FEMALE_FILE = "male_occupations.txt", "female_occupations.txt"

#: file name -> sha256 of the authors' bytes (../shared/benchmarks/README.md)
SHA256 = {
    "anti_stereotyped_type1.txt.dev":
        "a4e0ebae344e78b56f657a42e8ae684b9db7747d177c5e7149c0907ebb7f3bf6",
    "anti_stereotyped_type1.txt.test":
        "331db5bd74bfefebf146a60b67645152a4a1991570d2a56f57154103ac361dd2",
    "anti_stereotyped_type2.txt.dev":
        "763ad829ad724f9a85ead689ba8ca69072020cb1238def6210f0fc6a47b97e59",
    "anti_stereotyped_type2.txt.test":
        "336571ac1ea8c06cd2aba8e5dd2bd98e00acc0c48da3e4ec5ec7e54eb2633a8f",
    "pro_stereotyped_type1.txt.dev":
        "dd55a0d220fe4c0ceb63dd4648223fb4fe1a58d5ad95c116a002ad24b0e292a5",
    "pro_stereotyped_type1.txt.test":
        "db7838907238a758eeb5779e48f38c013b892910d6fe864456c59f04245c6689",
    "pro_stereotyped_type2.txt.dev":
        "8f0250de723cea9328e3eaf7169e07936f01aa5909ce7aa580db66eb803f4e86",
    "pro_stereotyped_type2.txt.test":
        "ea1c1fd94fa612e3cc44d7fa3cc4cb76021bb63fdf94f9826f430051e9052438",
    FEMALE_FILE: "693bff12286c2c1d46c7d4d45a44a631574710c30b39c1a3001bb7bdebb44ed8",
    MALE_FILE: "6b82d88847b69d56d207a0c396e9830b031890de585e916e6b4e9bc50672657e",
}

#: the authors' licence and README (kept beside the data; not read by the loader)
EXTRA = {"LICENSE": ("LICENSE",
                     "fdc813af7e33d0d7852c742a8a3983934d3c1c770014062246883c194c363830"),
         "WinoBias/wino/readme.md": ("UPSTREAM_README.md",
                                     "adecfe62f9863e683da5d8c01dd8ce08443fda44da08d7d78a70855ea9e6d852")}
#: what ``data fetch`` downloads: the ten data files at ``WinoBias/wino/data/<file>``,
#: the licence and the README (paths and sha256 checked against the commit's tree)
SOURCE = DataSource(repo=REPO, commit=COMMIT,
                    files={**{PREFIX + f: h for f, h in SHA256.items()},
                           **{path: h for path, (_, h) in EXTRA.items()}},
                    dest=NAME, licence=LICENCE,
                    local={path: name for path, (name, _) in EXTRA.items()})

PRONOUN_GENDER = {"he": "male", "his": "male", "him": "male", "himself": "male",
                  "she": "female", "her": "female", "hers": "female", "herself": "female"}
ITEM_COLUMNS = ["split", "type", "stereotype", "line", "item_id", "pair", "sentence", "first",
                "second", "gold", "pronoun", "pronoun_gender", "gold_gender"]
_LINE = re.compile(r"(\d+) (.*)")
_BRACKET = re.compile(r"\[([^\]]*)\]")
_PRONOUNS = re.compile(r"\b(" + "|".join(PRONOUN_GENDER) + r")\b", re.IGNORECASE)


def sentence_file(stereotype: str, type_: str, split: str) -> str:
    """``pro_stereotyped_type1.txt.dev``."""
    return f"{stereotype}_stereotyped_{type_}.txt.{split}"


@dataclass(frozen=True)
class WinoBiasData:
    """The parsed release: ``items`` (one row per sentence), the directory read, and the
    sha256 of every file read."""
    items: pd.DataFrame
    directory: Path
    sha256: dict[str, str]

    @property
    def release(self) -> dict[str, str]:
        """``{file: "official" | "not the official release"}`` against :data:`SHA256`."""
        return {f: "official" if h == SHA256.get(f) else "not the official release"
                for f, h in self.sha256.items()}

    @property
    def official(self) -> bool:
        return all(v == "official" for v in self.release.values())


def _read(path: Path, sha: dict[str, str]) -> str:
    """The file's text (ASCII as released); its sha256 recorded in ``sha``."""
    if not path.is_file():
        raise DataError(f"missing WinoBias file (run `fairness-tests data fetch --benchmark "
                        f"{NAME}` or set $FAIRNESS_WINOBIAS_DIR)", path=path)
    raw = path.read_bytes()
    sha[path.name] = hashlib.sha256(raw).hexdigest()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text (byte {exc.start})", path=path) from None


def read_occupations(directory: Path, sha: dict[str, str]) -> dict[str, str]:
    """``{occupation (lower-case): "male" | "female"}`` from the two lists."""
    out: dict[str, str] = {}
    for name, gender in ((MALE_FILE, "male"), (FEMALE_FILE, "female")):
        for i, line in enumerate(_read(directory / name, sha).splitlines(), 1):
            occ = line.strip().lower()
            if not occ:
                continue
            if occ in out:
                raise DataError(f"occupation {occ!r} listed twice", path=directory / name,
                                line=i, key="occupation")
            out[occ] = gender
    return out


def occupation_mentions(text: str, occupations: dict[str, str]) -> list[tuple[int, str]]:
    """``[(start, occupation as written), ...]``: the whole-word, case-insensitive
    mentions of the listed occupations in ``text``, longest first where they overlap,
    in order of position."""
    pattern = _mentions_pattern(tuple(occupations))
    return [(m.start(), m.group(1)) for m in pattern.finditer(text)]


@functools.lru_cache(maxsize=4)
def _mentions_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    """One alternation of ``names`` (longest first), whole words, case-insensitive."""
    ordered = sorted(names, key=lambda n: (-len(n), n))
    return re.compile(r"\b(" + "|".join(re.escape(n) for n in ordered) + r")\b",
                      re.IGNORECASE)


def parse_line(line: str, occupations: dict[str, str], path: Path, lineno: int) -> dict:
    """One sentence's fields (see the module's docstring); a :class:`DataError` naming
    the file, line and field when the line does not have the release's shape."""
    def bad(message: str, key: str) -> DataError:
        return DataError(message, path=path, line=lineno, key=key)
    m = _LINE.fullmatch(line.rstrip())
    if not m or int(m.group(1)) != lineno:
        raise bad(f"expected '{lineno} <sentence>', got {line[:40]!r}", "line number")
    text = m.group(2)
    brackets = _BRACKET.findall(text)
    if len(brackets) < 2:
        raise bad(f"{len(brackets)} bracketed mentions, expected an entity and a pronoun",
                  "brackets")
    entity = occupation_mentions(brackets[0], occupations)
    if len(entity) != 1:
        raise bad(f"the first bracket {brackets[0]!r} holds no single occupation", "entity")
    pronouns = [b.strip() for b in brackets[1:]]
    if any(p.lower() not in PRONOUN_GENDER for p in pronouns):
        raise bad(f"a bracket after the entity is not a pronoun: {pronouns}", "pronoun")
    sentence = text.replace("[", "").replace("]", "")
    mentions = occupation_mentions(sentence, occupations)
    firsts = [occ for _, occ in mentions[:2]]
    gold = entity[0][1]
    if len(firsts) < 2 or gold.lower() not in [o.lower() for o in firsts] \
            or firsts[0].lower() == firsts[1].lower():
        raise bad(f"the gold {gold!r} is not one of two distinct first occupations {firsts}",
                  "occupations")
    return {"sentence": sentence, "first": firsts[0], "second": firsts[1], "gold": gold,
            "pronoun": pronouns[0], "pronoun_gender": PRONOUN_GENDER[pronouns[0].lower()],
            "gold_gender": occupations[gold.lower()]}


def read_file(directory: Path, stereotype: str, type_: str, split: str,
              occupations: dict[str, str], sha: dict[str, str]) -> list[dict]:
    """Every sentence of one file (exactly :data:`LINES_PER_FILE`)."""
    path = directory / sentence_file(stereotype, type_, split)
    lines = _read(path, sha).splitlines()
    if len(lines) != LINES_PER_FILE:
        raise DataError(f"{len(lines)} lines, the release has {LINES_PER_FILE}", path=path)
    return [{"split": split, "type": type_, "stereotype": stereotype, "line": i,
             "item_id": f"{type_}/{split}/{stereotype}/{i:03d}",
             **parse_line(line, occupations, path, i)} for i, line in enumerate(lines, 1)]


def twins(pro: dict, anti: dict) -> bool:
    """Same gold occupation, same distractor, pronouns of different genders."""
    def occ(r: dict) -> tuple[str, str]:
        return r["gold"].lower(), ({r["first"], r["second"]} - {r["gold"]}).pop().lower()
    return occ(pro) == occ(anti) and pro["pronoun_gender"] != anti["pronoun_gender"]


def template_text(row: dict) -> tuple[str, str]:
    """(sentence lower-cased, every gendered pronoun one placeholder, gold lower-case)."""
    return _PRONOUNS.sub("PRON", row["sentence"]).lower(), row["gold"].lower()


def assign_pairs(pro: list[dict], anti: list[dict]) -> None:
    """Set ``pair`` on the rows of one type and split (see the module docstring)."""
    by_text: dict[tuple[str, str], list[dict]] = {}
    for r in anti:
        by_text.setdefault(template_text(r), []).append(r)
    for p, a in zip(pro, anti, strict=True):
        if twins(p, a):
            p["pair"] = a["pair"] = f"{p['type']}/{p['split']}/{p['line']:03d}"
    for p in pro:
        if "pair" in p:
            continue
        match = [a for a in by_text.get(template_text(p), []) if "pair" not in a]
        if len(match) == 1:
            p["pair"] = match[0]["pair"] = f"{p['type']}/{p['split']}/{p['line']:03d}"
    for r in (*pro, *anti):
        r.setdefault("pair", f"{r['type']}/{r['split']}/{r['stereotype']}{r['line']:03d}")


def load_winobias(directory: str | Path | None = None,
                  splits: tuple[str, ...] = SPLITS) -> WinoBiasData:
    """Every sentence of ``splits`` (both types, pro and anti), in (split, type,
    stereotype, line) order, from ``directory`` (default:
    :func:`~fairness_tests.core.paths.benchmark_data_dir`)."""
    root = benchmark_data_dir(NAME, directory)
    sha: dict[str, str] = {}
    occupations = read_occupations(root, sha)
    rows: list[dict] = []
    for split in splits:
        for type_ in TYPES:
            pro, anti = (read_file(root, s, type_, split, occupations, sha) for s in STEREOTYPES)
            assign_pairs(pro, anti)
            rows += pro + anti
    return WinoBiasData(pd.DataFrame(rows, columns=ITEM_COLUMNS), root, dict(sorted(sha.items())))
