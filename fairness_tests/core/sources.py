"""Where a benchmark's data comes from: the authors' repository at a recorded commit, and
the sha256 of every file (what ``data fetch`` downloads and checks, and what a run
reports as the official release or not)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class DataSource:
    """``repo``: ``owner/name`` on GitHub; ``commit``: the recorded commit; ``files``:
    ``{path in the repository: sha256}``; ``dest``: the folder name under the data
    directory (:func:`fairness_tests.core.paths.benchmark_data_dir`); ``local``:
    ``{path in the repository: file name in dest}`` where they differ (default: the
    path's last part); ``licence``: the data's licence, as the authors state it."""
    repo: str
    commit: str
    files: dict[str, str]
    dest: str
    licence: str = ""
    local: dict[str, str] = field(default_factory=dict)

    def local_name(self, path: str) -> str:
        return self.local.get(path, path.rsplit("/", 1)[-1])

    def url(self, path: str) -> str:
        """The raw file at the recorded commit."""
        return f"https://raw.githubusercontent.com/{self.repo}/{self.commit}/{path}"

    def release_status(self, directory: Path) -> dict[str, str]:
        """``{local file name: "official" | "modified" | "missing"}`` of ``directory``
        against the recorded sha256."""
        out = {}
        for path, digest in self.files.items():
            p = directory / self.local_name(path)
            if not p.is_file():
                out[p.name] = "missing"
            else:
                got = hashlib.sha256(p.read_bytes()).hexdigest()
                out[p.name] = "official" if got == digest else "modified"
        return out
