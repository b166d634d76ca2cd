"""``fairness-tests data fetch``: a benchmark's official files, verified. The benchmark's
own fetch when its ``commands`` module has one (a ``fetch(config)`` function: a fetch
with options of its own, e.g. BBQ's categories; no ``--benchmark``: the first fetchable
one); else its declared data source (:mod:`fairness_tests.pipeline.data_fetch`)."""
from __future__ import annotations

import importlib
import json
import os
import shlex
import sys
from typing import Callable

from fairness_tests.cli.command import add_command
from fairness_tests.core.paths import benchmark_data_dir, display_path
from fairness_tests.core.registry import REGISTRY
from fairness_tests.pipeline.benchmark import benchmark
from fairness_tests.pipeline.config_data import FETCHABLE, DataFetchConfig
from fairness_tests.pipeline.data_fetch import fetch_source, release_line, source_of


def register(subparsers) -> None:
    data = subparsers.add_parser("data", help="data sets")
    dsub = data.add_subparsers(dest="data_command", required=True)
    add_command(dsub, "fetch", DataFetchConfig, cmd_fetch,
                help=f"install a benchmark's official files ({', '.join(FETCHABLE)}): download "
                     "from the authors' repository at the recorded commit, or --from a local "
                     "copy; verified by sha256 (and by what a benchmark's own fetch checks "
                     "besides, e.g. git blob ids)")


def _say(line: str) -> None:
    print(line, file=sys.stderr)


def cmd_fetch(c: DataFetchConfig) -> int:
    """The fetch asked; prints the JSON summary (dest, each file's sha256, how it got
    there and its release status) and, on stderr, one line a file."""
    name = c.fetched()
    own = own_fetch(name)
    if own is not None:
        return own(c)
    source = source_of(name)
    dest = benchmark_data_dir(source.dest, c.dest)
    files = fetch_source(source, dest, base_url=c.base_url, from_dir=c.from_dir,
                         timeout=c.timeout, log=_say)
    print(json.dumps({"benchmark": name, "repository": source.repo, "commit": source.commit,
                      "licence": source.licence, "dest": display_path(dest),
                      "files": {n: f.to_dict() for n, f in files.items()}}, indent=2))
    for f in files.values():
        _say(f"{name} data: {release_line(source, f)}")
    if os.path.abspath(dest) != os.path.abspath(benchmark_data_dir(source.dest)):
        _say(where_line(source.dest, dest))
    return 0


def own_fetch(name: str) -> Callable[[DataFetchConfig], int] | None:
    """The ``fetch(config)`` function of the ``commands`` module of the registered
    benchmark ``name`` (:attr:`fairness_tests.pipeline.benchmark.Benchmark.commands`), or
    None (the generic fetch of its data source)."""
    commands = benchmark(name).commands if name in REGISTRY else None
    fetch = getattr(importlib.import_module(commands), "fetch", None) if commands else None
    return fetch if callable(fetch) else None


def where_line(name: str, dest: str | os.PathLike) -> str:
    """How to point the benchmark's commands at ``dest``: its absolute path, as a shell
    line (quoted for a POSIX shell)."""
    path = os.path.abspath(dest)
    return (f"{name} data in {path}; the commands look there after:\n"
            f"    export FAIRNESS_{name.upper()}_DIR={shlex.quote(path)}")


__all__ = ["register"]
