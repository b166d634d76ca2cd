"""The official BBQ release: its eleven categories, where each file sits in the BBQ
repository (nyu-mll/BBQ at commit :data:`COMMIT`), and how a copy is verified.

Every file is verified by its **git blob id** (``sha1(b"blob <size>\\0" + bytes)``, what
``git hash-object`` prints; known for all twelve files) and, where known, its
**sha256** (known for nine). :func:`digests` computes both in one pass.

Categories: the nine single-attribute ones (one protected attribute: Age, ...,
Sexual_orientation) and the two intersectional ones (race x gender, race x SES), in
the order of :data:`CATEGORIES`; ``all`` names the eleven.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from fairness_tests.core.errors import ConfigError, suggest

#: the registered benchmark whose data ``data fetch`` installs by this module's rules
#: (``data fetch`` with no ``--benchmark``, or ``--benchmark`` this name)
BENCHMARK = "bbq"
COMMIT = "bea11bd97d79217245b5871acd247b9d6eb24598"
BASE_URL = f"https://raw.githubusercontent.com/nyu-mll/BBQ/{COMMIT}"

SINGLE = ("Age", "Disability_status", "Gender_identity", "Nationality",
          "Physical_appearance", "Race_ethnicity", "Religion", "SES", "Sexual_orientation")
INTERSECTIONAL = ("Race_x_SES", "Race_x_gender")
CATEGORIES = SINGLE + INTERSECTIONAL
#: what ``--categories`` means when not given: the intersectional audit
DEFAULT_CATEGORIES = INTERSECTIONAL
ALL = "all"

METADATA_FILE = "additional_metadata.csv"
METADATA_PATH = f"supplemental/{METADATA_FILE}"


@dataclass(frozen=True)
class OfficialFile:
    """One file of the release: its path in the BBQ repository and its digests."""
    path: str
    blob: str
    sha256: str | None = None

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def _data(category: str, blob: str, sha256: str | None = None) -> OfficialFile:
    return OfficialFile(f"data/{category}.jsonl", blob, sha256)


#: file name (``Age.jsonl``, ``additional_metadata.csv``) -> the official file
OFFICIAL: dict[str, OfficialFile] = {f.name: f for f in (
    _data("Age", "5c5e7586163b869fe029e77e63716f2026e4ae08",
          "46e805b3fc2d8cbd26eeb8e8430d98cf7b2dc9c83574ff3674e8ce4f0fca2a60"),
    _data("Disability_status", "9aedeccaf599299cdfa523531d625ae85ecb9131",
          "375d40d9b71f056150264445ec189b13934998f3f49a1e311aa7578eb3b45e5f"),
    _data("Gender_identity", "dc79ceaaa9e7126edc99a200d632899c50274b16"),
    _data("Nationality", "cba9b63d34536cb51a6cbae76b189df3d2a945c0",
          "a583e74666aec0341ded8aa3983e7cad694eb24de72c254d28b2df3035720090"),
    _data("Physical_appearance", "8cbdf83265459083224e3a2d37809294ff12ad77",
          "e48d7e13508565f4801574e611043470c25c95a0a62af3699cb5ee7cb02608fb"),
    _data("Race_ethnicity", "68daf3d692b27a10596772b3b15742b26f0b110e"),
    _data("Religion", "44c1940ee22f00891ab4a5526a293691957aeacb",
          "cb9555f9f3454a52cd2df85956b59bd7fcca5aa922c8527693b1164d08417616"),
    _data("SES", "78d11ffbdb70f501617345e5c697d00045d57c29"),
    _data("Sexual_orientation", "a06351f4dd67ba30632396eeb0c3677c67b7d387",
          "2c71036b9e7584fe589c42aef32c1a42bc01b9a5e9b1b8704342630cdb08cefd"),
    _data("Race_x_SES", "905cd8a5b8734e2063fe524e69a38f0a71c75907",
          "af8e2ae3d0e5be9ebcbfe7149e591d47ff649e263307f4548f7fb12f6a6d83e8"),
    _data("Race_x_gender", "dd09a905b284690445d36259d675243950fa0bd7",
          "e5dbba782f8c4e25b99dd5470b5136e2db73dbf401cf6d4a5a3ed31b02f95696"),
    OfficialFile(METADATA_PATH, "564eb184be7427cefe9f1ffd8fd03cb700e6aa98",
                 "f36708416b0e7adb81b47ad1926f9c39c2beb611702b73b01e06c9b6c9ffbd3d"),
)}

#: sha256 of the files whose sha256 is known (the loader's ``official`` test)
OFFICIAL_SHA256 = {n: f.sha256 for n, f in OFFICIAL.items() if f.sha256}


def file_name(category: str) -> str:
    return f"{category}.jsonl"


def resolve_categories(names: tuple[str, ...] | list[str] | None,
                       default: tuple[str, ...] = DEFAULT_CATEGORIES) -> tuple[str, ...]:
    """The categories meant by ``--categories``: ``None`` -> ``default``; ``all`` -> the
    eleven; otherwise the names given, each once, in :data:`CATEGORIES` order."""
    if names is None or len(names) == 0:
        return tuple(default)
    wanted: set[str] = set()
    for n in names:
        if n == ALL:
            wanted.update(CATEGORIES)
        elif n in CATEGORIES:
            wanted.add(n)
        else:
            raise ConfigError(f"unknown BBQ category {n!r}{suggest(n, CATEGORIES)}; choose "
                              f"from {', '.join(CATEGORIES)} or {ALL}")
    return tuple(c for c in CATEGORIES if c in wanted)


def digests(path: str | Path, chunk: int = 1 << 20) -> tuple[str, str]:
    """(sha256, git blob id) of a file, in one pass; the blob id is
    ``sha1(b"blob <size>\\0" + bytes)``, what ``git hash-object`` prints."""
    path = Path(path)
    sha256 = hashlib.sha256()
    blob = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            sha256.update(block)
            blob.update(block)
    return sha256.hexdigest(), blob.hexdigest()


#: what :func:`release_status` says of a file
OFFICIAL_RELEASE = "official release"
NOT_OFFICIAL = "not the official release"
UNKNOWN_FILE = "unknown file"
RELEASE = f"nyu-mll/BBQ@{COMMIT[:8]}"


@dataclass(frozen=True)
class ReleaseStatus:
    """One file compared with the release (:func:`release_status`): ``status`` is
    :data:`OFFICIAL_RELEASE`, :data:`NOT_OFFICIAL` or :data:`UNKNOWN_FILE` (no file of
    that name in the release); ``claims`` the official file its name claims it is;
    ``why`` how it differs (None when official)."""
    name: str
    status: str
    sha256: str
    blob: str | None = None
    claims: OfficialFile | None = None
    why: str | None = None

    @property
    def official(self) -> bool:
        return self.status == OFFICIAL_RELEASE

    def line(self) -> str:
        """``<name>: official release (<path> of nyu-mll/BBQ@bea11bd9)``, or ``<name>: not
        the official release (claims to be <path> of ...: sha256 <its> vs official
        <release's>)`` (the git blob ids where the release's sha256 is not known)."""
        ref = self.claims
        if ref is None:
            return f"{self.name}: {UNKNOWN_FILE} (no file of that name in {RELEASE})"
        where = f"{ref.path} of {RELEASE}"
        if self.official:
            return f"{self.name}: {OFFICIAL_RELEASE} ({where})"
        if ref.sha256:
            diff = f"sha256 {self.sha256} vs official {ref.sha256}"
        elif self.blob:
            diff = f"git blob id {self.blob} vs official {ref.blob}"
        else:
            diff = "no git blob id recorded and the release's sha256 is not known"
        return f"{self.name}: {NOT_OFFICIAL} (claims to be {where}: {diff})"

    def to_dict(self) -> dict:
        """What a run and a card record of the file: its status, the official file it
        claims to be and that file's digests."""
        ref = self.claims
        out: dict = {"status": self.status, "sha256": self.sha256}
        if self.blob:
            out["git_blob"] = self.blob
        if ref is not None:
            out["claims"] = f"{ref.path} ({RELEASE})"
            out["official_git_blob"] = ref.blob
            if ref.sha256:
                out["official_sha256"] = ref.sha256
        return out

    @classmethod
    def from_dict(cls, name: str, d: dict) -> "ReleaseStatus":
        """The inverse of :meth:`to_dict` (``claims`` is looked up by ``name``)."""
        return cls(name, d["status"], d["sha256"], d.get("git_blob"), OFFICIAL.get(name))


def release_status(name: str, sha256: str, blob: str | None) -> ReleaseStatus:
    """Whether a file called ``name`` with these digests is the release's file of that
    name: official iff its git blob id equals the release's (when ``blob`` is given)
    and its sha256 too where the release's is known; with neither comparable (no
    ``blob``, no official sha256) it is not shown to be official."""
    ref = OFFICIAL.get(name)
    if ref is None:
        return ReleaseStatus(name, UNKNOWN_FILE, sha256, blob,
                             why=f"{name} is not a file of the BBQ release")
    why = None
    if blob is not None and blob != ref.blob:
        why = f"git blob id {blob} is not the official {ref.blob} ({ref.path} at {COMMIT[:8]})"
    elif ref.sha256 and sha256 != ref.sha256:
        why = f"sha256 {sha256} is not the official {ref.sha256} ({ref.path})"
    elif blob is None and not ref.sha256:
        why = f"no git blob id to compare, and the sha256 of {ref.path} is not known"
    return ReleaseStatus(name, NOT_OFFICIAL if why else OFFICIAL_RELEASE, sha256, blob, ref, why)


def verify(name: str, sha256: str, blob: str) -> str | None:
    """Why a file called ``name`` with these digests is not the official one (None if it
    is): :func:`release_status`'s reason."""
    return release_status(name, sha256, blob).why


def recorded_release(sha256: dict[str, str], blob: dict[str, str] | None = None,
                     recorded: dict[str, dict] | None = None) -> list[ReleaseStatus]:
    """The status of every file a run recorded, by name: as the run recorded it
    (``recorded``, :meth:`ReleaseStatus.to_dict`), else computed from its digests (a
    run recorded before statuses were)."""
    recorded, blob = recorded or {}, blob or {}
    return [ReleaseStatus.from_dict(n, recorded[n]) if n in recorded
            else release_status(n, s, blob.get(n)) for n, s in sorted(sha256.items())]


def release_lines(statuses: list[ReleaseStatus]) -> list[str]:
    """One console line per file: ``BBQ data: <ReleaseStatus.line()>``."""
    return [f"BBQ data: {st.line()}" for st in statuses]
