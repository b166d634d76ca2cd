"""The forward-pass workers (side by side, results in the calling thread, failures after
the running jobs finish, thread counts restored) and the BLAS linear layers."""
from __future__ import annotations

import importlib
import importlib.util
import threading
import time
from typing import Any

import numpy as np
import pytest

from fairness_tests.core.errors import ConfigError
from fairness_tests.models.backends import blas_linear
from fairness_tests.models.backends.workers import Workers, resolve_workers

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="needs torch (the [local] extra)")
#: imported when the module's first test runs, not when a worker collects the file
torch: Any = None


@pytest.fixture(scope="module", autouse=True)
def _torch() -> None:
    global torch
    torch = importlib.import_module("torch")


def test_two_workers_run_two_jobs_at_the_same_time():
    """Each job waits for the other at a barrier: run one after the other, the first
    would time out there."""
    barrier = threading.Barrier(2, timeout=20)

    def job(x):
        barrier.wait()
        return x * 10

    with Workers(2, 1) as w:
        got = sorted((j, r) for j, r, _dt in w.run([1, 2], job))
    assert got == [(1, 10), (2, 20)]


def test_jobs_run_on_a_worker_thread_longest_first_and_report_their_time():
    ran, caller = [], threading.get_ident()

    def job(x):
        ran.append((x, threading.get_ident()))
        time.sleep(0.01 * x)
        return x

    with Workers(1, 1) as w:
        out = list(w.run([1, 3, 2], job, cost=lambda x: x))
    assert [x for x, _ in ran] == [3, 2, 1]                     # longest first
    assert all(t != caller for _, t in ran)                     # never in the caller
    assert [j for j, _r, _dt in out] == [3, 2, 1]
    assert all(dt >= 0.01 * j * 0.9 for j, _r, dt in out)


def test_a_failing_job_is_raised_after_the_running_jobs_finish():
    finished = threading.Event()

    def job(x):
        if x == "slow":
            time.sleep(0.3)
            finished.set()
            return x
        raise ValueError("boom")

    with Workers(2, 1) as w:
        with pytest.raises(ValueError, match="boom"):
            for _ in w.run(["slow", "bad"], job, cost=lambda x: x == "slow"):
                pass
        assert finished.is_set()          # nothing is left computing behind the caller


def test_thread_counts_are_the_workers_inside_and_the_callers_after():
    before = torch.get_num_threads()
    with Workers(2, 1) as w:
        inside = [r for _j, r, _dt in w.run([0, 1], lambda _: torch.get_num_threads())]
        assert torch.get_num_threads() == 1                    # the caller's small ops
    assert inside == [1, 1]
    assert torch.get_num_threads() == before


def test_resolve_workers():
    assert resolve_workers(None, 2, "cpu") == 2 and resolve_workers("auto", 4, "cpu") == 4
    assert resolve_workers(None, 8, "cuda") == 1 and resolve_workers("3", 2, "cpu") == 3
    assert resolve_workers("auto", 64, "cpu") == 8                 # AUTO_MAX
    for bad in ("two", 0, "-1"):
        with pytest.raises(ConfigError) as e:
            resolve_workers(bad, 2, "cpu")
        assert e.value.key == "workers"


@pytest.mark.skipif(not blas_linear.available(), reason="numpy is not linked to OpenBLAS")
def test_blas_linear_equals_torch_and_is_used_only_in_the_workers(monkeypatch):
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 48, bias=True)
    x = torch.randn(3, 5, 64)
    with torch.inference_mode():
        ref = torch.nn.functional.linear(x, lin.weight, lin.bias)
    assert blas_linear.install(torch.nn.Sequential(lin)) == 1
    assert blas_linear.install(torch.nn.Sequential(lin)) == 1      # wrapped once
    calls = []
    real = np.matmul
    monkeypatch.setattr(np, "matmul", lambda *a, **k: calls.append(1) or real(*a, **k))
    with torch.inference_mode():
        outside = lin(x)
    assert calls == [] and torch.equal(outside, ref)               # torch's own path
    def in_inference_mode(t):               # a thread-local mode: the worker enters it
        with torch.inference_mode():
            return lin(t)

    with Workers(1, 1, blas=True) as w:
        [(_, inside, _)] = list(w.run([x], in_inference_mode))
    assert calls == [1] and inside.shape == (3, 5, 48)
    np.testing.assert_allclose(inside.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    # with autograd on (outside inference mode), a worker keeps torch's path
    with Workers(1, 1, blas=True) as w:
        [(_, grad_out, _)] = list(w.run([x], lambda t: lin(t)))
    assert calls == [1] and grad_out.requires_grad


def test_blas_needs_one_thread_per_worker():
    assert not Workers(1, 2, blas=True).blas
    assert "OpenBLAS" not in Workers(1, 2, blas=True).describe()
    assert Workers(2, 1, blas=True).describe() == \
        "2 workers x 1 thread, linear layers in OpenBLAS"
