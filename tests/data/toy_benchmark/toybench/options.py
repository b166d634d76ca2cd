"""The toy benchmark's own audit option (its ``option_group``): ``--toy-verb`` on the
audit's command line, ``--fairness-toy-verb`` for pytest, ``toy_verb`` in a project's
table, without a line of fairness_tests edited."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fairness_tests.core.options import Checked, opt


@dataclass(frozen=True, kw_only=True)
class ToyOptions(Checked):
    toy_verb: Literal["said", "thought"] = opt(
        "said", "toy benchmark: the verb after the occupation")
