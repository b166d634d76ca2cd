"""Independent forward passes at the same time: ``W`` worker threads, each running
torch with its own ``threads // W`` intra-op threads.

On a CPU, one matrix multiply split across 2 threads runs slower than two multiplies
of one thread each, side by side: the threads of one operation wait for each other
at every barrier, and the small elementwise operations of a 270M model are mostly
barrier (``bench/bench_embedded_mc.py --workers 1,auto``, alternating: 2 workers of 1
thread answered 8.09 and 8.25 items/s, 1 worker of 2 threads 6.42 and 6.56, on 2
cores). torch releases the GIL inside its operations, so threads of one process
suffice: the model is loaded once and its weights are shared.

Work comes in groups (:meth:`~.prefix_tree.PrefixTree.batch_groups`): the jobs of one
group depend only on earlier groups. :meth:`Workers.run` computes a group's jobs
longest first (``cost``), each on the first free worker, and yields ``(job, result,
seconds)`` in the calling thread as each finishes, so the caller records answers and
reports progress there (the response store stays on one thread). With one worker
the jobs still run on that worker thread, so the calling thread's settings are never
those of the workers.

torch's intra-op thread count is per thread (OpenMP's ``nthreads-var``) but MKL's is
process-wide: each worker sets its own when it starts, the calling thread's is set to
the same for the duration (its small operations then start no thread team competing
with the workers), and on leaving the calling thread's count is set back, which sets
MKL's back too.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import time
from typing import Callable, Iterator, Sequence, TypeVar

from fairness_tests.core.errors import ConfigError
from fairness_tests.models.backends.blas_linear import enable_in_this_thread, single_threaded

#: most workers ``"auto"`` starts (more CPU threads are shared out among them)
AUTO_MAX = 8

J = TypeVar("J")
R = TypeVar("R")


def cpu_threads(threads: int | None) -> int:
    """The CPU threads a backend uses in all: ``threads``, else torch's intra-op thread
    count (the number of cores unless ``OMP_NUM_THREADS`` or the caller set it)."""
    if threads:
        return int(threads)
    import torch  # noqa: PLC0415  heavy optional dependency (the [local] extra)
    return max(int(torch.get_num_threads()), 1)


def resolve_workers(workers: int | str | None, threads: int, device: str) -> int:
    """``workers``: an int >= 1, or ``None``/``"auto"``: on a CPU one worker per CPU
    thread (each with one intra-op thread) up to :data:`AUTO_MAX` (each worker holds
    one batch's activations and cache, about 300 MB at 32 rows of this model); on a
    GPU one (its kernels already fill it)."""
    if workers in (None, "auto"):
        if not str(device).startswith("cpu"):
            return 1
        return min(max(int(threads), 1), AUTO_MAX)
    try:
        w = int(workers)
    except (TypeError, ValueError):
        raise ConfigError(f"workers must be a whole number >= 1 or 'auto', got {workers!r}",
                          key="workers") from None
    if w < 1:
        raise ConfigError(f"workers must be >= 1, got {w}", key="workers")
    return w


class Workers:
    """``n`` worker threads of ``threads_each`` torch intra-op threads; with ``blas``,
    their linear layers go through numpy's OpenBLAS (:mod:`.blas_linear`, one thread
    per worker only). A context manager: the threads exist inside it."""

    def __init__(self, n: int, threads_each: int, blas: bool = False):
        self.n, self.threads_each = int(n), max(int(threads_each), 1)
        self.blas = bool(blas) and self.threads_each == 1
        self._pool: cf.ThreadPoolExecutor | None = None
        self._stack: contextlib.ExitStack | None = None

    def describe(self) -> str:
        """``2 workers x 1 thread``: how the work is spread, for the progress line."""
        return (f"{self.n} worker{'s' if self.n != 1 else ''} x {self.threads_each} "
                f"thread{'s' if self.threads_each != 1 else ''}"
                + (", linear layers in OpenBLAS" if self.blas else ""))

    def __enter__(self) -> "Workers":
        import torch  # noqa: PLC0415  heavy optional dependency (the [local] extra)
        self._stack = contextlib.ExitStack()
        before = torch.get_num_threads()
        # restores MKL's process-wide count, which a worker's set_num_threads also sets
        self._stack.callback(torch.set_num_threads, before)
        torch.set_num_threads(self.threads_each)     # the calling thread's small ops
        if self.blas:
            self._stack.enter_context(single_threaded())
        self._pool = cf.ThreadPoolExecutor(self.n, thread_name_prefix="fairness-forward",
                                           initializer=self._start_worker)
        self._stack.callback(self._pool.shutdown, wait=True, cancel_futures=True)
        return self

    def _start_worker(self) -> None:
        import torch  # noqa: PLC0415  heavy optional dependency (the [local] extra)
        torch.set_num_threads(self.threads_each)
        if self.blas:
            enable_in_this_thread()

    def __exit__(self, *exc) -> None:
        stack, self._stack, self._pool = self._stack, None, None
        if stack is not None:
            stack.close()

    def run(self, jobs: Sequence[J], fn: Callable[[J], R],
            cost: Callable[[J], float] = lambda job: 0.0) -> Iterator[tuple[J, R, float]]:
        """``fn(job)`` for every job on the workers, longest ``cost`` first;
        ``(job, result, seconds on its worker)`` as each finishes. An exception in a job
        is raised here once the jobs already running have finished (none is left
        computing behind the caller's back); the jobs not started yet are cancelled."""
        if self._pool is None:
            raise RuntimeError("Workers.run outside its with-block")

        def timed(job):
            t0 = time.perf_counter()
            res = fn(job)
            return res, time.perf_counter() - t0

        order = sorted(range(len(jobs)), key=lambda i: -cost(jobs[i]))
        futures = {self._pool.submit(timed, jobs[i]): i for i in order}
        try:
            for fut in cf.as_completed(futures):
                res, dt = fut.result()
                yield jobs[futures[fut]], res, dt
        finally:
            for fut in futures:
                fut.cancel()
            cf.wait(list(futures))
