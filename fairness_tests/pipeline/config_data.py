"""The configuration spec of ``fairness-tests data fetch`` (the machinery of
:mod:`fairness_tests.pipeline.config` builds it): which benchmark's data, where it goes,
and where it comes from.

``--benchmark`` takes the registered benchmarks that declare their data
(``Benchmark.source``: :func:`fairness_tests.core.registry.data_sources`) and the BBQ
benchmark, whose fetch keeps its own rules (files by category, git blob ids; what runs with
no ``--benchmark``)."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from fairness_tests.core.options import opt
from fairness_tests.core.registry import data_sources
from fairness_tests.pipeline.config import BBQCategoriesOption
from fairness_tests.protocols.bbq.official import BENCHMARK as BBQ_BENCHMARK

#: what ``--benchmark`` takes: BBQ, then every registered benchmark with a data source
FETCHABLE: tuple[str, ...] = (BBQ_BENCHMARK, *(n for n in data_sources() if n != BBQ_BENCHMARK))


@dataclass(frozen=True, kw_only=True)
class DataFetchConfig(BBQCategoriesOption):
    """``fairness-tests data fetch``: a benchmark's official files, verified."""
    CLI_FLAGS: ClassVar[dict[str, tuple[str, ...]]] = {"from_dir": ("--from",)}
    benchmark: str | None = opt(None, "the benchmark whose data to install: "
                                f"{', '.join(FETCHABLE)} (default: {BBQ_BENCHMARK})",
                                choices=FETCHABLE, metavar="NAME", pytest=False, toml=False)
    dest: str | None = opt(None, "directory to install the files in (default: where the "
                           "benchmark's commands look: $FAIRNESS_<NAME>_DIR, else "
                           "../shared/benchmarks/<name>; BBQ: $FAIRNESS_BBQ_DIR, else "
                           "../shared/bbq)", metavar="DIR", path=True, pytest=False,
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

    def bbq(self) -> bool:
        """Whether this fetch is BBQ's (no ``--benchmark``, or BBQ's name)."""
        return self.benchmark in (None, BBQ_BENCHMARK)

    def cross_check(self) -> Iterable[tuple[str, str]]:
        if self.categories and not self.bbq():
            yield "categories", (f"BBQ's categories; {self.benchmark} installs all its files "
                                 "(drop --categories)")
