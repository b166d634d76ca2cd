"""The ``fairness-tests`` command.

Each area registers its own subcommands (``register(subparsers)`` in its
``cli`` module), so this file only wires them together. Imports are lazy: the
command starts fast and nothing touches the network at import time.

Exit codes: 0 success; 1 a fairness rule failed (audit/gate); 2 bad usage or bad
input (the message names the file, line or key); 3 missing recorded responses
(replay mode); 4 budget reached (``audit --max-cost``: everything recorded so far
is kept in the store, and the same command run again resumes).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any, NoReturn

from fairness_tests.core.errors import FairnessTestsError, MissingResponsesError
from fairness_tests.core.project import ENV_PROJECT_DIR
from fairness_tests.models.cost import EXIT_BUDGET, BudgetReached

# each module defines register(subparsers)
AREAS = [
    "fairness_tests.cli.bbq",
    "fairness_tests.cli.models",
    "fairness_tests.cli.generative",
    "fairness_tests.cli.card",
    "fairness_tests.cli.audit",
    "fairness_tests.cli.init",
    "fairness_tests.cli.gate",
    "fairness_tests.cli.compare",
]


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line (``fairness-tests audit: error: ... (see --help)``),
    exit 2; subcommands' parsers are of this class too. No abbreviated options: a
    misspelt flag is an error, never another option."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="fairness-tests", description=__doc__.split("\n\n")[0])
    parser.add_argument("--project-dir", default=None, metavar="DIR",
                        help="project directory whose thresholds/, fixtures/recordings/ and "
                             "fixtures/cards/ override the packaged defaults (default: the "
                             "current directory when it holds thresholds/ or a "
                             "[tool.fairness_tests] table in pyproject.toml)")
    sub = parser.add_subparsers(dest="command", required=True)
    for mod in AREAS:
        importlib.import_module(mod).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    before = os.environ.get(ENV_PROJECT_DIR)
    if args.project_dir:       # for this command (and the processes it starts)
        os.environ[ENV_PROJECT_DIR] = os.path.abspath(args.project_dir)
    try:
        rc = args.func(args)
    except MissingResponsesError as exc:
        print(f"fairness-tests: {exc}", file=sys.stderr)
        return 3
    except BudgetReached as exc:
        print(f"fairness-tests: {exc}", file=sys.stderr)
        return EXIT_BUDGET
    except FairnessTestsError as exc:
        print(f"fairness-tests: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if args.project_dir:
            if before is None:
                os.environ.pop(ENV_PROJECT_DIR, None)
            else:
                os.environ[ENV_PROJECT_DIR] = before
    return int(rc or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
