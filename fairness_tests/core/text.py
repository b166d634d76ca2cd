"""Decoding input files: UTF-8 only, one place (light: no numpy, so the option spec and
the YAML readers use it without loading the data stack)."""
from __future__ import annotations

from pathlib import Path

from fairness_tests.core.errors import DataError

#: byte order marks of the encodings an input file is refused in (input files are UTF-8)
_FOREIGN_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
                 (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))


def decode_input(raw: bytes, path: str | Path, error: type[DataError] = DataError) -> str:
    """The text of an input file's bytes: UTF-8 (a leading UTF-8 byte order mark is
    dropped). A UTF-16/32 byte order mark, or bytes that are not UTF-8, is a DataError
    naming the file (and the line) and saying input files must be UTF-8 (``error``: its
    class). Every YAML, JSON and JSONL input is decoded here."""
    refuse_foreign_bom(raw, path, error)
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise error(f"not UTF-8 ({exc.reason}); input files must be UTF-8", path=path,
                    line=line) from None


def refuse_foreign_bom(head: bytes, path: str | Path,
                       error: type[DataError] = DataError) -> None:
    """An ``error`` when ``head`` (a file's first bytes) is a UTF-16/32 byte order mark."""
    for bom, name in _FOREIGN_BOMS:
        if head.startswith(bom):
            raise error(f"encoded as {name} (byte order mark); input files must be "
                        "UTF-8: save it as UTF-8", path=path)
