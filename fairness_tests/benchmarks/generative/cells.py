"""The generative audit's protocol cells, declared for the rule engine
(``Benchmark.protocol_cells``; :class:`fairness_tests.rules.protocol.ProtocolCells`): the
slice rules of its views are evaluated per protocol cell (``generative_cells``: overall,
each prompt family, each decoding regime) and per seed, and their spread is decomposed
across families and across decoding regimes."""
from __future__ import annotations

from fairness_tests.benchmarks.generative.schema import PROTOCOL_TABLE, SEED_TABLE, VIEWS
from fairness_tests.rules.protocol import ProtocolCells

CELLS = ProtocolCells(
    table=PROTOCOL_TABLE, sources=tuple(VIEWS), across="slice",
    id_suffixes=tuple(f"_per_{'_'.join(by)}" for by in VIEWS.values() if by),
    seeds=SEED_TABLE,
    spread=tuple((by[0], name) for name, by in VIEWS.items() if by in (("family",),
                                                                        ("decoding",))))
