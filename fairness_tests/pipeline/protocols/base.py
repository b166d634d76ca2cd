"""The interface every protocol implements.

A :class:`Family` holds what its protocols share (data, items, the grid) for one
configuration; each :class:`AuditProtocol` of the family builds its requests from it;
once every protocol of the family has been asked, :meth:`Family.results` turns the
requests and responses into records, the family's metric tables (its one table builder)
and the run metadata that describes it for the card.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd

from fairness_tests.models.requests.request import Request, Response
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.pipeline.protocols import protocol
from fairness_tests.pipeline.stages import SILENT, Stages


@dataclass
class Asked:
    """One protocol's requests and their responses, in the same order."""
    requests: list[Request]
    responses: list[Response]


@dataclass
class Results:
    """What a family adds to a run: metric tables, per-item records and the run
    metadata fields that describe it (``{"bbq": BBQInfo}``, ...)."""
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    records: dict[str, pd.DataFrame] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


class Family(ABC):
    """What the protocols of one family share, loaded once per run."""

    def __init__(self, config: AuditConfig):
        self.config = config
        #: the run's response store (set by the audit; a judge scorer asks through it)
        self.store: Any = None
        #: where the family's stage lines go while it computes (set by the audit)
        self.stages: Stages = SILENT

    @abstractmethod
    def results(self, asked: dict[str, Asked]) -> Results:
        """Records, tables and metadata from every asked protocol of the family."""


class AuditProtocol(ABC):
    """A registered protocol: a name, its family, and its requests."""
    name: ClassVar[str]
    family: ClassVar[type[Family]]

    @abstractmethod
    def requests(self, family: Any) -> list[Request]:
        """The requests this protocol asks, built from its family's shared data."""


def by_family(names: Sequence[str]) -> Iterable[tuple[type[Family], list[AuditProtocol]]]:
    """The registered protocols of ``names``, grouped by family (in the order each
    family first appears)."""
    groups: dict[type[Family], list[AuditProtocol]] = {}
    for name in names:
        cls = protocol(name)
        groups.setdefault(cls.family, []).append(cls())
    return groups.items()
