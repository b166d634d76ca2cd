"""Which per-item records two runs share: what the gate can compare, refused before
anything is computed or printed when it is nothing."""
from __future__ import annotations

from typing import Mapping

from fairness_tests.core.errors import ConfigError
from fairness_tests.pipeline.benchmark import families
from fairness_tests.run.result import RunResult


def gated() -> list[str]:
    """The records the gate compares item by item: those of every registered family that
    declares ``gated`` (``FamilySpec.records``), in registry order."""
    return [f.records for f in families() if f.gated]


def _has(run: RunResult) -> str:
    names = [p for p in gated() if run.records.get(p) is not None
             and len(run.records[p])]
    return " and ".join(names) + " records" if names else "no per-item records"


def shared_families(baseline: RunResult, candidate: RunResult,
                    cluster: Mapping[str, str]) -> list[str]:
    """The gated families both runs have per-item records of. ConfigError, before anything
    is computed or printed, when there is none (e.g. a BBQ run against a generative
    run) or when a resampling unit is chosen for a family the runs do not share
    (``--cluster prompt`` on BBQ runs would be silently ignored)."""
    shared = [f.name for f in families() if f.gated
              and candidate_pair(baseline, candidate, f.records)[0] is not None]
    runs = f"the baseline run has {_has(baseline)}, the candidate run {_has(candidate)}"
    for family, unit in cluster.items():
        if family not in shared:
            raise ConfigError(f"--cluster {unit} is a {family} resampling unit, but the runs "
                              f"share no {family} records ({runs})")
    if not shared:
        raise ConfigError(f"nothing to gate: {runs}; gate two runs of the same benchmark")
    return shared


def candidate_pair(baseline: RunResult, candidate: RunResult, name: str):
    """Both runs' records of ``name``, or (None, None) unless both have some."""
    rb, rc = baseline.records.get(name), candidate.records.get(name)
    if rb is None or rc is None or not len(rb) or not len(rc):
        return None, None
    return rb, rc
