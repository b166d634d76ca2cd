"""KoBBQ's audit options (its ``Benchmark.option_group``): the configuration spec makes
them options of the audit's command line, pytest flags and ``[tool.fairness_tests]`` keys,
as every option. Light: the option spec only."""
from __future__ import annotations

from dataclasses import dataclass

from fairness_tests.core.options import Checked, opt


@dataclass(frozen=True, kw_only=True)
class KoBBQOptions(Checked):
    kobbq_prompt: int = opt(
        1, "KoBBQ: which of its authors' five evaluation prompts (0_evaluation_prompts.tsv) "
        "is asked; the packaged recordings hold prompt 1 only", ge=1, le=5, metavar="N")


def kobbq_options(config: object) -> KoBBQOptions:
    """``config`` (an audit configuration, which holds every registered option group) as
    KoBBQ's options."""
    if not isinstance(config, KoBBQOptions):
        raise TypeError(f"{type(config).__name__} holds no KoBBQ options")
    return config
