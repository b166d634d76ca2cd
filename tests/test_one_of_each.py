"""Issue 21, "one of each": one ProtocolChangeError, one table-schema registry."""
from __future__ import annotations

from typing import get_args, get_type_hints

import pytest

from fairness_tests.benchmarks.bbq import consistency
from fairness_tests.benchmarks.bbq import schema as bbq_schema
from fairness_tests.benchmarks.bbq import tables as bbq_tables
from fairness_tests.benchmarks.generative import metrics as generative
from fairness_tests.benchmarks.generative import schema as generative_schema
from fairness_tests.benchmarks.generative.schema import GenerativeCluster
from fairness_tests.compare import report as compare_report
from fairness_tests.compare import tables as compare_tables
from fairness_tests.metrics import schema
from fairness_tests.metrics.schema import BBQCluster
from fairness_tests.models.requests.request import RepeatMode
from fairness_tests.pipeline import gate
from fairness_tests.pipeline.config import AuditConfig, GateConfig
from fairness_tests.pipeline.gate import ProtocolChangeError
from fairness_tests.run import result
from fairness_tests.stats.significance import GateMode


def test_compare_raises_the_gates_protocol_change_error(monkeypatch):
    """There were two classes: catching the gate's missed compare's."""
    monkeypatch.setattr(compare_report, "protocol_facts",
                        lambda entries: (["bbq items: 8112 vs 2880"], []))
    with pytest.raises(ProtocolChangeError, match="bbq items: 8112 vs 2880"):
        compare_report.build_report([])


def test_the_table_registry_is_the_one_source_of_names():
    """The three VIEWS, CONSISTENCY_METRICS twice and the column lists of the gate, the
    run directory and the BBQ builder were separate copies."""
    assert generative.VIEWS is generative_schema.VIEWS
    assert generative.METRICS is generative_schema.GENERATIVE_METRICS
    assert consistency.METRICS is bbq_schema.CONSISTENCY_METRICS
    assert bbq_schema.CONSISTENCY_METRICS[:8] == bbq_schema.CONSISTENCY_SUMMARY
    for module in (compare_tables, bbq_tables, gate, result):
        assert not hasattr(module, "CONSISTENCY_METRICS") and not hasattr(module, "VIEWS")
        # a column list of its own (not the registry's object imported) is a second copy
        assert not {"ID_COLUMNS", "ITEM_COLUMNS", "RECORD_COLUMNS", "LETTER_COLUMNS"} & set(
            n for n, v in vars(module).items() if v is not getattr(schema, n, None))
    # every grouping column of a table is a cell id, read back as text
    assert {c for t in schema.TABLES.values() for c in t.columns} <= set(schema.ID_COLUMNS)
    for name, by in generative_schema.VIEWS.items():
        assert schema.TABLES[name].columns == (*by, "slice")
    assert set(schema.BBQ_ITEM_COLUMNS) <= set(schema.BBQ_RECORD_COLUMNS)


def test_the_configuration_offers_the_layers_choices():
    """The configuration spec spells its choices out (loading it must not import the
    metric layers: the plugin's load cost); they are the layers' Literals."""
    hints = get_type_hints(AuditConfig)
    assert get_args(hints["repeat_mode"]) == get_args(RepeatMode)
    assert get_args(hints["bbq_cluster"]) == get_args(BBQCluster)
    assert get_args(hints["gen_cluster"]) == get_args(GenerativeCluster)
    mode = get_type_hints(GateConfig)["mode"]
    assert get_args(get_args(mode)[0]) == get_args(GateMode)
