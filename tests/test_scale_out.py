"""Recording across processes against a real loopback server (issue 12, §4 and §5):

- ``--rpm`` holds across processes that share a store: three concurrent audits with
  ``--rpm 240`` stay within 240 requests per minute + 10% *together*;
- ``--shard i/N``: three processes each record their shard into their own store;
  ``store merge`` of the three gives the same keys, responses and tables as one
  unsharded run, and no request is asked twice.
"""
from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from fault_server import FaultServer  # noqa: E402
from helpers import RAN, finish  # noqa: E402

from fairness_tests.cli.main import main  # noqa: E402
from fairness_tests.core.errors import ConfigError  # noqa: E402
from fairness_tests.models.asking.shard import in_shard, parse_shard  # noqa: E402

pytestmark = [pytest.mark.live_server, pytest.mark.slow]

ROOT = HERE.parent


def audit_cmd(url: str, store: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "fairness_tests.cli.main", "audit", "--live", "--backend",
            "litellm", "--model", "openai/fault-model", "--api-base", url, "--recordings",
            "--n-boot", "100", "--store", str(store), "--out", str(out), *extra]


def start_all(cmds: list[list[str]]) -> list[subprocess.Popen]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=ROOT, env=env) for c in cmds]


def run_all(cmds: list[list[str]], timeout: float = 400) -> list[str]:
    return finish_all(start_all(cmds), timeout)


def finish_all(procs: list[subprocess.Popen], timeout: float = 400) -> list[str]:
    outs = finish(procs, timeout)               # one bound for all; killed past it
    for p, (_, e) in zip(procs, outs, strict=True):
        assert p.returncode in RAN, e[-3000:]          # 1: a rule failed; 5: too small to judge
    return [o for o, _ in outs]


def store_rows(path: Path) -> dict[str, tuple]:
    con = sqlite3.connect(path)
    try:
        return {k: rest for k, *rest in con.execute(
            "SELECT key, request_json, text, answer, status, fingerprint FROM responses")}
    finally:
        con.close()


RPM = 240            # 0.25 s between request starts, over the three processes together
SPACING = 60.0 / RPM


@pytest.mark.timeout(480)                    # run_all's bound (400 s) and the rest
def test_rpm_holds_across_three_processes(tmp_path):
    store = tmp_path / "shared.sqlite"
    # answers wait until all three processes have asked (however slowly each one starts
    # on a loaded machine), so they are known to run at once
    with FaultServer(together=(3, lambda body: body.get("seed"))) as srv:
        # three audits with other seeds: other keys, so each asks all of its requests
        run_all([audit_cmd(srv.url, store, tmp_path / f"o{k}", "--benchmarks", "bbq",
                           "--categories", "Race_x_SES", "--rotations", "none",
                           "--limit", "4", "--seed", str(k), "--rpm", str(RPM))
                 for k in range(3)])
        hits = sorted(srv.hits, key=lambda h: h.t)
    n = len(hits)
    assert n == 3 * 16                                 # 1 dataset x 2 x 2 cells x 4 items
    span = hits[-1].t - hits[0].t
    rate = (n - 1) / span * 60.0
    assert rate <= RPM * 1.10, f"{rate:.1f} requests/min over {span:.1f} s"
    # the three really ran at once: each one's requests interleave with the others'
    by_proc: dict[int, list[float]] = {}
    for h in hits:
        by_proc.setdefault(h.body["seed"], []).append(h.t)
    assert len(by_proc) == 3
    start, end = max(t[0] for t in by_proc.values()), min(t[-1] for t in by_proc.values())
    together = [h.t for h in hits if start <= h.t <= end]
    # at least 12 request spacings (3 s) in which all three were asking
    assert end - start > 12 * SPACING, (f"the processes overlapped {end - start:.2f} s "
                                        f"({len(together)} requests); the test proves nothing")
    assert (len(together) - 1) / (end - start) * 60.0 <= RPM * 1.10
    assert (tmp_path / "shared.sqlite.limits").exists()


@pytest.mark.timeout(480)                    # finish_all's bound (400 s) and the rest
def test_three_shards_merged_equal_one_unsharded_run(tmp_path):
    protocol = ["--benchmarks", "bbq", "consistency", "generative", "probe", "--categories",
                "Race_x_SES", "--limit", "1", "--repeats", "3", "--gen-limit", "6"]
    # the three shard processes and the unsharded run (in this process: not what is
    # tested here) at once, each against its own server, which counts what it was asked
    with FaultServer() as one_srv, FaultServer() as srv:
        procs = start_all([audit_cmd(srv.url, tmp_path / f"s{i}.sqlite", tmp_path / f"o{i}",
                                     *protocol, "--shard", f"{i}/3") for i in (1, 2, 3)])
        try:
            rc = main(audit_cmd(one_srv.url, tmp_path / "one.sqlite", tmp_path / "one",
                                *protocol)[3:])
        finally:
            outs = finish_all(procs)
        assert rc in RAN                                # 1: a rule failed; 5: too small to judge
        unsharded_asks = len(one_srv.hits)
        sharded_asks = len(srv.hits)
    assert all(f"recorded shard {i}/3" in o for i, o in zip((1, 2, 3), outs, strict=True))
    assert not any((tmp_path / f"o{i}").exists() for i in (1, 2, 3))   # no tables from a shard
    shards = [store_rows(tmp_path / f"s{i}.sqlite") for i in (1, 2, 3)]
    for i, rows in zip((1, 2, 3), shards, strict=True):
        assert rows and all(in_shard(k, i, 3) for k in rows)           # each holds its shard
    assert sum(len(r) for r in shards) == len(set().union(*shards))    # disjoint
    assert sharded_asks == unsharded_asks == len(store_rows(tmp_path / "one.sqlite"))

    assert main(["store", "merge", *(str(tmp_path / f"s{i}.sqlite") for i in (1, 2, 3)),
                 "--into", str(tmp_path / "merged.sqlite")]) == 0
    assert store_rows(tmp_path / "merged.sqlite") == store_rows(tmp_path / "one.sqlite")
    # the merged store replays to the same tables as the unsharded live run
    rc = main(["audit", "--backend", "litellm", "--model", "openai/fault-model",
               "--recordings", "--n-boot", "100", *protocol,
               "--store", str(tmp_path / "merged.sqlite"), "--out", str(tmp_path / "merged")])
    assert rc in RAN
    tables = sorted(p.name for p in (tmp_path / "one" / "run" / "tables").iterdir())
    assert len(tables) > 10
    for name in tables + ["../verdicts.csv"]:
        a = (tmp_path / "one" / "run" / "tables" / name).read_bytes()
        b = (tmp_path / "merged" / "run" / "tables" / name).read_bytes()
        assert a == b, name
    # the run from the merged store names the shards on its card (issue 12: merge provenance)
    asking = yaml.safe_load((tmp_path / "merged" / "card" / "card.yaml").read_text())[
        "evaluation_protocol"]["asking"]
    merged = asking["merged_from"]
    assert [m["source"] for m in merged] == [str(tmp_path / f"s{i}.sqlite") for i in (1, 2, 3)]
    assert [m["rows"] for m in merged] == [len(r) for r in shards]
    assert [m["added"] for m in merged] == [len(r) for r in shards]      # disjoint shards
    assert "store merged from" in asking["statement"]
    assert asking["repeat_mode"]["used"] == "calls" and "between-call" in asking["statement"]
    one = yaml.safe_load((tmp_path / "one" / "card" / "card.yaml").read_text())
    assert "merged_from" not in one["evaluation_protocol"]["asking"]


def test_shard_spec_is_checked():
    assert parse_shard("2/3") == (2, 3)
    for bad in ("0/3", "4/3", "1", "a/b", ""):
        with pytest.raises(ConfigError, match="--shard"):
            parse_shard(bad)
    # every key in exactly one shard, about a third each
    keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(3000)]
    counts = [sum(in_shard(k, i, 3) for k in keys) for i in (1, 2, 3)]
    assert sum(counts) == len(keys) and min(counts) > 900
