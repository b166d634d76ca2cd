"""A model's linear layers through numpy's OpenBLAS, in single-threaded workers.

``y = x W^T (+ b)``, the same product torch's own ``linear`` computes (to float
round-off), for the CPU workers of :mod:`.workers` that run one torch thread each.
Measured here (AMD EPYC, AVX2, 2 cores, two single-threaded GEMMs side by side),
OpenBLAS's single-threaded sgemm beats the MKL torch ships with at this model's shapes:
165 vs 122 GFLOP/s for the 640 -> 2048 projections, 165 vs 144 for 2048 -> 640, and
81 vs 41 for the 262,144-row output head; in the model the 240-item audit ran 3-6%
faster (alternating runs in one process: medians 28.9 vs 30.8 s in one set, 28.96 vs
29.81 s in another). With more than one thread per worker it is not used: OpenBLAS's
own threads and torch's OpenMP threads spin against each other (measured twice as
slow).

:func:`install` wraps the ``forward`` of each :class:`torch.nn.Linear` of a model
(once); a wrapped layer takes the BLAS path only in a thread that
:func:`enable_in_this_thread` turned it on in, and for a CPU input of the weight's
dtype (one of :data:`DTYPES`) without autograd, and is torch's ``linear`` everywhere
else, so a model shared with other code computes as before outside the workers.
:func:`single_threaded` holds numpy's BLAS at one thread (it is process-wide) while the
workers run, and restores it after.
"""
from __future__ import annotations

import contextlib
import functools
import threading
from typing import Iterator

import numpy as np

_STATE = threading.local()
#: the weight dtypes the BLAS path computes in (sgemm, dgemm)
DTYPES = ("float32", "float64")


@functools.cache
def available() -> bool:
    """Whether numpy's BLAS is OpenBLAS (threadpoolctl finds it among the loaded
    libraries; looked up once per process)."""
    from threadpoolctl import threadpool_info  # noqa: PLC0415  heavy, optional
    return any(info.get("internal_api") == "openblas" for info in threadpool_info())


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """numpy's BLAS at one thread for the duration (threadpoolctl), restored after."""
    from threadpoolctl import threadpool_limits  # noqa: PLC0415  heavy, optional
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def enable_in_this_thread() -> None:
    """Turn the BLAS path on for wrapped layers called from this thread (a worker's,
    which ends with the workers)."""
    _STATE.on = True


def install(model) -> int:
    """Wrap every ``torch.nn.Linear`` of ``model`` (idempotent); returns how many are
    wrapped."""
    import torch  # noqa: PLC0415  heavy optional dependency (the [local] extra)
    n = 0
    for mod in model.modules():
        if isinstance(mod, torch.nn.Linear):
            if not isinstance(mod.__dict__.get("forward"), _BlasForward):
                # an instance attribute shadows Linear.forward on purpose (idempotent wrap)
                mod.forward = _BlasForward(mod)  # type: ignore[method-assign]
            n += 1
    return n


class _BlasForward:
    """The ``forward`` of one linear layer: numpy's BLAS in an enabled thread."""

    def __init__(self, mod):
        self.mod = mod

    def __call__(self, x):
        import torch  # noqa: PLC0415  heavy optional dependency (the [local] extra)
        mod = self.mod
        w = mod.weight
        if (not getattr(_STATE, "on", False) or x.device.type != "cpu"
                or w.device.type != "cpu" or x.dtype != w.dtype
                or str(w.dtype).replace("torch.", "") not in DTYPES
                or (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad))):
            return torch.nn.functional.linear(x, w, mod.bias)
        k = x.shape[-1]
        out = np.matmul(x.reshape(-1, k).detach().numpy(), w.detach().numpy().T)
        if mod.bias is not None:
            out += mod.bias.detach().numpy()
        return torch.from_numpy(out).view(*x.shape[:-1], w.shape[0])
