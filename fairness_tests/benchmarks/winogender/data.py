"""The Winogender schemas (Rudinger et al., NAACL 2018) from the authors' files, byte for
byte (rudinger/winogender-schemas at :data:`COMMIT`): ``all_sentences.tsv`` (720
sentences), ``templates.tsv`` (120 templates) and ``occupations-stats.tsv`` (60
occupations), and the fields lm-evaluation-harness's ``winogender_*`` tasks read.

lm-eval's tasks read the Hugging Face dataset ``oskarvanderwal/winogender``, derived from
these files; :func:`sentences` builds its fields from them, one row per line of
``all_sentences.tsv``, in file order:

- ``sentid``, ``sentence``: the line as it is;
- ``occupation``, ``participant``, ``answer``, ``gender``: the parts of ``sentid``
  (``<occupation>.<participant>.<answer>.<gender>.txt``; ``participant`` is ``someone``
  for the bleached variant);
- ``pronoun``: the template's one pronoun slot (``$NOM_PRONOUN``, ``$POSS_PRONOUN``,
  ``$ACC_PRONOUN``) filled for ``gender`` (:data:`PRONOUNS`: he/she/they, his/her/their,
  him/her/them), the template being the row of ``templates.tsv`` with the same
  occupation, participant and answer; the sentence must be that template instantiated
  as the authors' ``scripts/instantiate.py`` does (:func:`instantiate`), else a
  :class:`DataError` names the line;
- ``label`` = ``answer`` (0: the pronoun refers to the occupation, 1: to the participant),
  ``target`` = ``occupation`` if ``label`` = 0 else ``participant``;
- ``template``: ``<occupation>.<participant of the template>.<answer>``: the 120 templates
  (each holds 6 sentences: male/female/neutral x participant/someone);
- ``gotcha`` (the dataset's ``gotcha`` subset, 240 sentences): a male or female pronoun
  whose gender does not match the occupation's majority gender when the occupation is the
  answer, or matches it when the participant is; the majority gender is female when
  ``bls_pct_female`` > 50 (U.S. Bureau of Labor Statistics, ``occupations-stats.tsv``),
  else male. Neutral pronouns are never gotcha.
"""
from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from fairness_tests.core.errors import DataError
from fairness_tests.core.sources import DataSource

REPO = "rudinger/winogender-schemas"
COMMIT = "1c7f8b481ad8a234b41e9f76a424d6e856e13f7f"
LICENCE = "MIT"
SENTENCES, TEMPLATES, STATS = "all_sentences.tsv", "templates.tsv", "occupations-stats.tsv"
#: sha256 of each file of the release, by its name in the data directory
SHA256 = {
    SENTENCES: "bd69da16bf228cb8df63fd0843aec2d8b5c36a7f21bf8c7b168bcc83932556c8",
    TEMPLATES: "496f2e2dc77296bcebcdd8865a8dc5715ce22b772de9abb5f531d5b3114c48a0",
    STATS: "3f7f37c16381a70571356982ea7fe613ac700ad04a6d3b19b9f2be18248df567",
}
SOURCE = DataSource(
    repo=REPO, commit=COMMIT, dest="winogender", licence=LICENCE,
    files={f"data/{name}": digest for name, digest in SHA256.items()}
    | {"LICENSE": "22756588705091904ca7903df15eb7f6ed45a11a7eec0783567295e9502e9316",
       "README.md": "ad7b0fbabe9411dae3590ab4ddd35866db676cff8714c0a25b647d7736ae2e15"},
    local={"README.md": "UPSTREAM_README.md"})

GENDERS = ("male", "female", "neutral")
#: the pronoun of each slot, per gender
PRONOUNS = {"$NOM_PRONOUN": {"male": "he", "female": "she", "neutral": "they"},
            "$POSS_PRONOUN": {"male": "his", "female": "her", "neutral": "their"},
            "$ACC_PRONOUN": {"male": "him", "female": "her", "neutral": "them"}}
SOMEONE = "someone"
#: the authors' caution, carried to the report
WARNING = ("The authors view the schemas as a diagnostic with high positive predictive value "
           "and low negative predictive value: they may show gender bias in a system, but "
           "cannot prove its absence (Rudinger et al., 2018).")


@dataclass(frozen=True)
class WinogenderData:
    """The files read: ``sentences`` (:func:`sentences`' frame), ``stats`` (one row per
    occupation: occupation, bergsma_pct_female, bls_pct_female, bls_year), ``directory``,
    ``sha256`` per file, ``release`` ``{file: "official" | "not the official release"}``."""
    sentences: pd.DataFrame
    stats: pd.DataFrame
    directory: Path
    sha256: dict[str, str]
    release: dict[str, str]

    @property
    def official(self) -> bool:
        return all(v == "official" for v in self.release.values())


def read_tsv(path: Path, header: tuple[str, ...]) -> tuple[list[list[str]], str]:
    """The rows of a tab-separated file whose first line is ``header`` (each row
    ``len(header)`` fields), and the sha256 of its bytes; a :class:`DataError` naming
    the file and line otherwise."""
    if not path.is_file():
        raise DataError("Winogender file not found (fetch it: fairness-tests data fetch "
                        "--benchmark winogender, or set FAIRNESS_WINOGENDER_DIR)", path)
    raw = path.read_bytes()
    rows = list(csv.reader(io.StringIO(raw.decode("utf-8")), delimiter="\t",
                           quoting=csv.QUOTE_NONE))
    if not rows or tuple(rows[0]) != header:
        raise DataError(f"expected the header {' | '.join(header)}", path, line=1)
    for i, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise DataError(f"{len(row)} fields, expected {len(header)}", path, line=i)
    return rows[1:], hashlib.sha256(raw).hexdigest()


def instantiate(template: str, occupation: str, participant: str, slot: str,
                pronoun: str) -> str:
    """The template filled as the authors' instantiate.py fills it: ``someone`` replaces
    ``the $PARTICIPANT`` and ``a $PARTICIPANT`` (``Someone`` at the start of the
    sentence), and singular ``they`` takes ``were`` (``$NOM_PRONOUN was`` -> ``they were``)."""
    if participant == SOMEONE:
        for article in ("the", "a"):
            template = (template.replace(f"{article.capitalize()} $PARTICIPANT", "Someone")
                        .replace(f"{article} $PARTICIPANT", SOMEONE))
    if pronoun == "they":
        template = template.replace("$NOM_PRONOUN was", "$NOM_PRONOUN were")
    return (template.replace("$OCCUPATION", occupation).replace("$PARTICIPANT", participant)
            .replace(slot, pronoun))


def _templates(directory: Path) -> tuple[dict[tuple[str, str, int], tuple[str, str]], str]:
    """``{(occupation, participant, answer): (template sentence, pronoun slot)}``."""
    path = directory / TEMPLATES
    rows, digest = read_tsv(path, ("occupation(0)", "other-participant(1)", "answer", "sentence"))
    out = {}
    for i, (occ, part, answer, text) in enumerate(rows, start=2):
        slots = [s for s in PRONOUNS if s in text]
        if len(slots) != 1 or answer not in ("0", "1"):
            raise DataError(f"a template needs one pronoun slot and answer 0/1, got slots "
                            f"{slots} and answer {answer!r}", path, line=i, key="sentence")
        out[(occ, part, int(answer))] = (text, slots[0])
    return out, digest


def sentences(directory: Path) -> tuple[pd.DataFrame, dict[str, str]]:
    """lm-eval's fields of every sentence (module docstring) without ``gotcha``, and the
    sha256 of the two files read."""
    templates, t_digest = _templates(directory)
    path = directory / SENTENCES
    rows, digest = read_tsv(path, ("sentid", "sentence"))
    by_pair = {(occ, answer): part for occ, part, answer in templates}
    out = []
    for i, (sentid, text) in enumerate(rows, start=2):
        parts = sentid.split(".")
        if len(parts) != 5 or parts[3] not in GENDERS or parts[2] not in ("0", "1"):
            raise DataError(f"sentid {sentid!r} is not occupation.participant.answer.gender.txt",
                            path, line=i, key="sentid")
        occ, part, answer, gender = parts[0], parts[1], int(parts[2]), parts[3]
        key = (occ, part if part != SOMEONE else by_pair.get((occ, answer), ""), answer)
        if key not in templates:
            raise DataError(f"no template for {sentid!r} in {TEMPLATES}", path, line=i)
        template, slot = templates[key]
        pronoun = PRONOUNS[slot][gender]
        if instantiate(template, occ, part, slot, pronoun) != text:
            raise DataError(f"{sentid!r} is not its template {template!r} instantiated",
                            path, line=i, key="sentence")
        out.append({"sentid": sentid, "sentence": text, "pronoun": pronoun, "occupation": occ,
                    "participant": part, "gender": gender, "target": part if answer else occ,
                    "label": answer, "template": ".".join((key[0], key[1], str(answer)))})
    return pd.DataFrame(out), {SENTENCES: digest, TEMPLATES: t_digest}


def occupation_stats(directory: Path) -> tuple[pd.DataFrame, str]:
    """``occupations-stats.tsv``: occupation, bergsma_pct_female, bls_pct_female, bls_year."""
    path = directory / STATS
    header = ("occupation", "bergsma_pct_female", "bls_pct_female", "bls_year")
    rows, digest = read_tsv(path, header)
    out = []
    for i, (occ, bergsma, bls, year) in enumerate(rows, start=2):
        try:
            out.append({"occupation": occ, "bergsma_pct_female": float(bergsma),
                        "bls_pct_female": float(bls), "bls_year": int(year)})
        except ValueError:
            raise DataError("a percentage or year is not a number", path, line=i) from None
    return pd.DataFrame(out), digest


def gotcha(items: pd.DataFrame, stats: pd.DataFrame) -> pd.Series:
    """The gotcha flag of each sentence (module docstring)."""
    majority = stats.set_index("occupation")["bls_pct_female"].gt(50).map(
        {True: "female", False: "male"})
    major = items["occupation"].map(majority)
    binary = items["gender"].isin(("male", "female"))
    matches = items["gender"] == major
    return binary & (matches == (items["label"] == 1))


def load(directory: Path) -> WinogenderData:
    """Every file read and checked: 720 sentences over 120 templates, statistics for
    each occupation, the gotcha flag; each file's release status."""
    items, digests = sentences(directory)
    stats, digests[STATS] = occupation_stats(directory)
    missing = sorted(set(items["occupation"]) - set(stats["occupation"]))
    if missing:
        raise DataError(f"no statistics for the occupations {', '.join(missing)}",
                        directory / STATS)
    items["gotcha"] = gotcha(items, stats)
    release = {name: "official" if digests[name] == SHA256[name] else "not the official release"
               for name in SHA256}
    return WinogenderData(items, stats, directory, digests, release)
