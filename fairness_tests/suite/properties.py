"""Which decision rules each property test checks (selectors for
``@pytest.mark.fairness_rules``). A rule matched by none of them is checked by
``test_other_rules``, so a rule added to a thresholds file is never ignored; and which
tables the drift test snapshots (each benchmark's, :func:`drift_tables`)."""
from fairness_tests.pipeline.benchmark import benchmarks

PROPERTIES: dict[str, dict[str, str | list[str]]] = {
    "accuracy_floors": {"tables": "bbq", "metrics": "accuracy"},
    "sdis_bound": {"metrics": "s_dis"},
    "samb_bound": {"metrics": "s_amb"},
    "acc_gap": {"metrics": "acc_reinf_minus_counter"},
    "sf_df_bounds": {"metrics": ["sf", "df", "df_smoothed", "df_eb"]},
    "invalid_rate": {"tables": ["bbq", "bbq_groups"], "metrics": "invalid_rate"},
    "position_bias": {"metrics": "position_bias"},
    "mfaa_floor": {"tables": "consistency", "metrics": "mfaa_*"},
    "gtc_floor": {"tables": "consistency", "metrics": "gtc_*"},
    "worst_slice_stereotype": {"ids": "worst_slice_*"},
    "refusal_gap": {"ids": "refusal_gap*"},
    "slice_disparity": {"ids": "slice_disparity*"},
}


def benchmark_properties() -> dict[str, tuple[str | None, dict]]:
    """``{test name: (marker or None, selector)}`` of every registered benchmark's own
    properties (``Benchmark.properties``; ``test_`` is put in front of a name without it),
    in registry order; a test name two benchmarks declare is an error."""
    out: dict[str, tuple[str | None, dict]] = {}
    for b in benchmarks():
        for prop, sel in b.properties.items():
            name = prop if prop.startswith("test_") else f"test_{prop}"
            if name in out:
                raise ValueError(f"benchmark {b.name}: property test {name!r} is declared "
                                 "by another benchmark too")
            out[name] = (b.name if b.marker else None, dict(sel))
    return out


OTHER = {"exclude": [*PROPERTIES.values(), *(s for _, s in benchmark_properties().values())]}


def drift_tables() -> tuple[str, ...]:
    """The tables the drift test snapshots: every registered benchmark's
    ``drift_tables``, in registry order."""
    return tuple(dict.fromkeys(t for b in benchmarks() for t in b.drift_tables))
