"""BBQ's own options, declared with the configuration spec (:mod:`fairness_tests.core.
options`): its items (:class:`BBQDataOptions`: data directory, categories, item filter),
how the audit asks them (:class:`BBQOptions`, the ``option_group`` of BBQ and of the
consistency benchmark, which asks about the same items: the audit's command line, pytest
flags and ``[tool.fairness_tests]`` keys are generated from its fields) and the categories
``data fetch`` installs (:class:`BBQCategoriesOption`, its ``fetch_options``). Light: the
option spec and BBQ's category names only."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fairness_tests.benchmarks.bbq.official import ALL, CATEGORIES
from fairness_tests.core.options import Checked, opt


@dataclass(frozen=True, kw_only=True)
class BBQCategoriesOption(Checked):
    categories: tuple[str, ...] | None = opt(
        None, f"BBQ categories: any of {' '.join(CATEGORIES)}, or {ALL} (default: Race_x_SES "
        "Race_x_gender; bbq score: the categories its predictions name)",
        choices=(*CATEGORIES, ALL), metavar="CATEGORY")


@dataclass(frozen=True, kw_only=True)
class BBQDataOptions(BBQCategoriesOption):
    """Which BBQ items: the data directory, the categories and the item filter."""
    bbq_dir: str | None = opt(None, "BBQ data directory (default: $FAIRNESS_BBQ_DIR or "
                              "../shared/bbq; fairness-tests data fetch installs it)",
                              metavar="DIR", path=True)
    bbq_filter: Literal["intersectional", "none"] = opt(
        "intersectional", "item filter of the two intersectional categories: intersectional "
        "(the two people differ in both attributes) or none; single-attribute categories "
        "keep every item")


@dataclass(frozen=True, kw_only=True)
class BBQClusterOption(Checked):
    bbq_cluster: Literal["template", "item"] = opt(
        "template", "BBQ bootstrap unit: whole templates or single items")


@dataclass(frozen=True, kw_only=True)
class BBQOptions(BBQDataOptions, BBQClusterOption):
    """How the BBQ audit asks: decoding, repeats, rotations, sample."""
    temperature: float = opt(1.0, "sampling temperature of BBQ answers", ge=0.0, le=2.0)
    repeats: int = opt(20, "repeats per consistency item", ge=1, metavar="N")
    per_cell: int = opt(56, "consistency sample: items per dataset x context x polarity",
                        ge=1, metavar="N")
    rotations: Literal["none", "sample", "all"] = opt(
        "sample", "option rotations for position bias: none, the consistency sample, or "
        "all items")
    consistency_items: Literal["sample", "all"] = opt(
        "sample", "consistency over the seeded sample (448 items) or all items")


def bbq_options(config: object) -> BBQOptions:
    """``config`` (an audit configuration, which holds every registered option group) as
    BBQ's options."""
    if not isinstance(config, BBQOptions):
        raise TypeError(f"{type(config).__name__} holds no BBQ options")
    return config
