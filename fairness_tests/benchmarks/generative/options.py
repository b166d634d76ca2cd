"""The generative audit's own options, declared with the configuration spec
(:mod:`fairness_tests.core.options`): the protocol it expands (a suite, or a published
grid) and the reductions a run may state on its card (:class:`GenerativeOptions`, the
generative benchmark's ``option_group``; the counterfactual probe reads its three
reductions too). Light: the option spec and the protocol's seeds (read without building
its grid)."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from fairness_tests.benchmarks.generative.seeds import protocol_seeds
from fairness_tests.core.options import Checked, opt

#: the options of :class:`GenerativeOptions` the counterfactual probe reads too
REDUCTIONS = ("gen_seeds", "gen_max_new_tokens", "gen_limit")


@dataclass(frozen=True, kw_only=True)
class SuiteOption(Checked):
    suite: str | None = opt(None, "generative protocol YAML (default: the packaged suite); "
                            "scored outputs are checked against it", metavar="PATH",
                            path=True)


@dataclass(frozen=True, kw_only=True)
class GenClusterOption(Checked):
    gen_cluster: Literal["prompt", "row"] = opt(
        "prompt", "generative bootstrap unit: whole prompts or single generations")


@dataclass(frozen=True, kw_only=True)
class GenerativeOptions(SuiteOption, GenClusterOption):
    """The generative protocol a run expands, and its reductions."""
    published_grid: str | None = opt(None, "a published grid CSV instead of a suite",
                                     metavar="CSV", path=True)
    gen_seeds: tuple[int, ...] | None = opt(None, "only these seeds of the protocol "
                                            "(a reduction, stated on the card)", ge=1,
                                            metavar="SEED")
    gen_max_new_tokens: int | None = opt(None, "cap on new tokens of a generation (a "
                                         "reduction, stated on the card)", ge=1, metavar="N")
    gen_limit: int | None = opt(None, "smoke run: at most N grid rows", ge=1, metavar="N")

    def cross_check(self) -> Iterable[tuple[str, str]]:
        if self.suite and self.published_grid:
            yield "published_grid", "give a suite or a published grid, not both"
        elif self.gen_seeds:
            known = protocol_seeds(self.suite, self.published_grid)
            missing = [s for s in self.gen_seeds if known is not None and s not in known]
            if missing:
                yield "gen_seeds", (f"seed(s) {', '.join(map(str, missing))} not in the "
                                    f"protocol; its seeds: {', '.join(map(str, known or ()))}")


def generative_options(config: object) -> GenerativeOptions:
    """``config`` (an audit configuration, which holds every registered option group) as
    the generative audit's options."""
    if not isinstance(config, GenerativeOptions):
        raise TypeError(f"{type(config).__name__} holds no generative options")
    return config
