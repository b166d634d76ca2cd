"""numpy's BLAS at one thread while the statistics run.

The bootstrap and permutation tests multiply tall, narrow matrices (resamples x items
by items x a few columns): OpenBLAS splits each product over its threads, and its idle
threads spin between the thousands of small products of a run, which on a machine
with few cores doubles the CPU a run spends and slows its wall clock. One thread gives
the same numbers (a thread splits rows and columns of the product, never the sums
along the items) at half the CPU. Without ``threadpoolctl`` nothing changes."""
from __future__ import annotations

import contextlib
from typing import Iterator


@contextlib.contextmanager
def serial_blas() -> Iterator[None]:
    """numpy's BLAS limited to one thread for the duration, restored after."""
    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415  optional
    except ImportError:  # pragma: no cover - a dependency; a bare install runs as before
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
