"""One way to make a subcommand: its options are generated from its configuration class
(:mod:`fairness_tests.pipeline.config`), and its function receives the configuration the
spec built from the command line (and the project's ``[tool.fairness_tests]`` table),
once its paths are checked (:func:`fairness_tests.core.outputs.check_paths`: no output is,
holds or sits inside another of its paths; every output is writable), before any work."""
from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from fairness_tests.core.option_sources import add_arguments, cli_spelling
from fairness_tests.core.options import path_args
from fairness_tests.core.outputs import check_paths
from fairness_tests.pipeline.configure import command_config


def add_command(subparsers: Any, name: str, cls: type, func: Callable[[Any], int],
                build: Callable[[type, argparse.Namespace], Any] = command_config,
                **parser_kw: Any) -> argparse.ArgumentParser:
    """``name`` with the options of ``cls``; runs ``func(config)``."""
    p = subparsers.add_parser(name, **parser_kw)
    add_arguments(p, cls)
    p.set_defaults(func=lambda args: checked(func, build(cls, args)), config_class=cls)
    return p


def checked(func: Callable[[Any], int], config: Any) -> int:
    """``func(config)`` once the configuration's paths are checked."""
    check_paths(path_args(config, cli_spelling(type(config))))
    return func(config)
