"""The configuration spec of ``fairness-tests data fetch`` (the machinery of
:mod:`fairness_tests.pipeline.config` builds it): which benchmark's data, where it goes,
and where it comes from.

``--benchmark`` takes the registered benchmarks that declare their data
(``Benchmark.source``: :func:`fairness_tests.core.registry.data_sources`) and those with a
fetch of their own, whose options (``Benchmark.fetch_options``: BBQ's categories) the
configuration inherits; with no ``--benchmark``, the first of them in registry order."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from fairness_tests.core.options import Checked, opt
from fairness_tests.core.registry import load, load_all

#: the registered benchmarks whose own ``data fetch`` options the fetch takes
FETCH_GROUPS: dict[str, type] = {b.name: load(b.fetch_options) for b in load_all()
                                 if b.fetch_options}
#: what ``--benchmark`` takes, in registry order: the benchmarks that declare their data
#: or a fetch of their own (the first is the default)
FETCHABLE: tuple[str, ...] = tuple(b.name for b in load_all()
                                   if b.source or b.name in FETCH_GROUPS)


@dataclass(frozen=True, kw_only=True)
class DataFetchConfig(*dict.fromkeys(FETCH_GROUPS.values()),  # type: ignore[misc]
                      Checked):
    """``fairness-tests data fetch``: a benchmark's official files, verified."""
    CLI_FLAGS: ClassVar[dict[str, tuple[str, ...]]] = {"from_dir": ("--from",)}
    benchmark: str | None = opt(None, "the benchmark whose data to install: "
                                f"{', '.join(FETCHABLE)} (default: {FETCHABLE[0]})",
                                choices=FETCHABLE, metavar="NAME", pytest=False, toml=False)
    dest: str | None = opt(None, "directory to install the files in (default: where the "
                           "benchmark's commands look: $FAIRNESS_<NAME>_DIR, else its "
                           "folder in ../shared)", metavar="DIR", path=True, pytest=False,
                           toml=False, role="output_dir")
    from_dir: str | None = opt(None, "install from this local copy (a checkout of the "
                               "authors' repository, or a folder this command filled), "
                               "without network; each file is labelled official release or "
                               "not", metavar="DIR", path=True, pytest=False, toml=False)
    base_url: str | None = opt(None, "mirror of the authors' repository at the recorded "
                               "commit (default: https://raw.githubusercontent.com/<repo>/"
                               "<commit>); a file is fetched from URL/<its path in the "
                               "repository>", metavar="URL", pytest=False)
    timeout: float = opt(60.0, "seconds to wait for each file", gt=0, metavar="S",
                         pytest=False)

    def fetched(self) -> str:
        """The benchmark this fetch installs (``--benchmark``, else the first fetchable)."""
        return self.benchmark or FETCHABLE[0]

    def cross_check(self) -> Iterable[tuple[str, str]]:
        name = self.fetched()
        for owner, group in FETCH_GROUPS.items():
            for f in dataclasses.fields(group):
                if owner != name and getattr(self, f.name) != f.default:
                    yield f.name, (f"an option of {owner}'s fetch; {name} installs all its "
                                   f"files (drop it)")
