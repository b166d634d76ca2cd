"""``fairness-tests data fetch``: download the official BBQ files and verify them.

Downloads, from nyu-mll/BBQ at commit :data:`COMMIT` (``raw.githubusercontent``),
``data/Race_x_SES.jsonl``, ``data/Race_x_gender.jsonl`` and
``supplemental/additional_metadata.csv`` into ``--dest`` (flat, the layout the
loader reads). Each file is streamed to ``<name>.part`` while its sha256 is
computed, and renamed into place only when the digest equals the official value
(:data:`fairness_tests.protocols.bbq.data.OFFICIAL_SHA256`); a mismatch is a
:class:`DataError` and leaves nothing behind. A file already present with the
right digest is kept (not downloaded again).
"""
from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

from fairness_tests.core.errors import DataError
from fairness_tests.core.io import sha256_file
from fairness_tests.protocols.bbq.data import OFFICIAL_SHA256

COMMIT = "bea11bd97d79217245b5871acd247b9d6eb24598"
BASE_URL = f"https://raw.githubusercontent.com/nyu-mll/BBQ/{COMMIT}"
#: local file name -> path in the BBQ repository
REMOTE_PATHS = {
    "Race_x_SES.jsonl": "data/Race_x_SES.jsonl",
    "Race_x_gender.jsonl": "data/Race_x_gender.jsonl",
    "additional_metadata.csv": "supplemental/additional_metadata.csv",
}


def fetch(dest: str | Path, base_url: str = BASE_URL,
          expected: dict[str, str] | None = None, timeout: float = 60.0,
          log: Callable[[str], None] | None = None) -> dict[str, str]:
    """Download and verify every file; returns {file name: sha256}."""
    expected = dict(OFFICIAL_SHA256 if expected is None else expected)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, remote in REMOTE_PATHS.items():
        target = dest / name
        want = expected[name]
        if target.is_file() and sha256_file(target) == want:
            out[name] = want
            if log:
                log(f"{name}: present, sha256 ok")
            continue
        url = f"{base_url.rstrip('/')}/{remote}"
        out[name] = _download(url, target, want, timeout)
        if log:
            log(f"{name}: downloaded from {url}, sha256 ok")
    return out


def _download(url: str, target: Path, want: str, timeout: float) -> str:
    part = target.with_name(target.name + ".part")
    h = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp, open(part, "wb") as fh:
            while block := resp.read(1 << 20):
                h.update(block)
                fh.write(block)
    except urllib.error.HTTPError as exc:
        part.unlink(missing_ok=True)
        raise DataError(f"download failed: HTTP {exc.code} {exc.reason}", path=url) from None
    except (urllib.error.URLError, OSError) as exc:
        part.unlink(missing_ok=True)
        reason = getattr(exc, "reason", exc)
        raise DataError(f"download failed: {reason}", path=url) from None
    got = h.hexdigest()
    if got != want:
        part.unlink(missing_ok=True)
        raise DataError(f"sha256 mismatch: got {got}, expected {want} (file not saved)",
                        path=url)
    os.replace(part, target)
    return got
