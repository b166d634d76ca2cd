"""The ``fairness-tests`` command.

Each area registers its own subcommands (``register(subparsers)`` in its
``cli`` module), so this file only wires them together. Imports are lazy: the
command starts fast and nothing touches the network at import time.

Exit codes, every command (:class:`fairness_tests.core.exits.ExitCode`; the README's
table): 0 every evaluated rule holds and at least one was evaluated (or a command that
judges nothing succeeded); 1 a rule fails (audit, bbq score, generative score, gate,
card diff --exit-code, card validate --complete); 2 bad usage or bad input (one line
naming the file, line, key or option); 3 responses missing from the store (replay);
4 budget reached (``audit --max-cost``: everything recorded is kept, the same command
resumes); 5 nothing evaluated (every rule not evaluable); 6 incomplete (requests ended
in errors: how many and the first error are named; a rerun asks only those); 70 an
unexpected fault (one line; the traceback is in a log file whose path is printed);
130 interrupted (Ctrl-C: the store is consistent, outputs are old or new, whole).
"""
from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import tempfile
import traceback
from typing import Any, NoReturn

from fairness_tests.core.errors import FairnessTestsError, MissingResponsesError
from fairness_tests.core.exits import ExitCode
from fairness_tests.core.project import ENV_PROJECT_DIR
from fairness_tests.core.version import __version__
from fairness_tests.models.backends.cost import BudgetReached
from fairness_tests.pipeline.benchmark import benchmarks

# each module defines register(subparsers)
AREAS = [
    "fairness_tests.cli.data",
    "fairness_tests.cli.models",
    "fairness_tests.cli.card",
    "fairness_tests.cli.audit",
    "fairness_tests.cli.init",
    "fairness_tests.cli.gate",
    "fairness_tests.cli.compare",
    "fairness_tests.cli.view",
]


_DIRECTIVE = re.compile(r"^[ \t]*\.\. [^\n]*(?:\n|$)", re.MULTILINE)
_ROLE = re.compile(r":[a-z]+:`~?([^`<]*?)(?:\s*<[^`>]*>)?`")
_LITERAL = re.compile(r"``(.+?)``", re.DOTALL)
_INTERPRETED = re.compile(r"`([^`]+)`")


def plain_text(text: str) -> str:
    """A docstring's reStructuredText as the plain text of ``--help``: ````x```` -> x;
    ``:role:`a.b.C``` -> C (``:role:`text <target>``` -> text); ```x``` -> x; a line
    ``.. directive::`` removed; ``::`` ending a line -> ``:``."""
    text = _DIRECTIVE.sub("", text)
    text = _ROLE.sub(lambda m: m.group(1).strip().rsplit(".", 1)[-1]
                     if " " not in m.group(1).strip() else m.group(1).strip(), text)
    text = _LITERAL.sub(r"\1", text)
    text = _INTERPRETED.sub(r"\1", text)
    return re.sub(r"::$", ":", text, flags=re.MULTILINE)


class PlainHelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, descriptions and option help as :func:`plain_text`."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain_text(text))

    def _expand_help(self, action: argparse.Action) -> str:
        return plain_text(super()._expand_help(action))


class PlainRawDescriptionHelpFormatter(PlainHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """:class:`PlainHelpFormatter`, the description's line breaks kept."""


def _plain(formatter: type) -> type:
    """The plain-text counterpart of an argparse formatter class."""
    if issubclass(formatter, PlainHelpFormatter):
        return formatter
    if issubclass(formatter, argparse.RawDescriptionHelpFormatter):
        return PlainRawDescriptionHelpFormatter
    return PlainHelpFormatter


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line (``fairness-tests audit: error: ... (see --help)``),
    exit 2; subcommands' parsers are of this class too. No abbreviated options: a
    misspelt flag is an error, never another option. Help is plain text: the
    docstrings' markup is removed (:func:`plain_text`), for every command."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs["formatter_class"] = _plain(kwargs.get("formatter_class",
                                                      argparse.HelpFormatter))
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
    for bench in benchmarks():
        if bench.commands:
            importlib.import_module(bench.commands).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; every outcome is an :class:`ExitCode` (never a traceback)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("fairness-tests: interrupted: the store keeps every response recorded so "
              "far; outputs are the old ones or the new ones, whole", file=sys.stderr)
        return ExitCode.INTERRUPTED


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    before = os.environ.get(ENV_PROJECT_DIR)
    if args.project_dir:       # for this command (and the processes it starts)
        os.environ[ENV_PROJECT_DIR] = os.path.abspath(args.project_dir)
    try:
        rc = args.func(args)
    except MissingResponsesError as exc:
        print(f"fairness-tests: {exc}", file=sys.stderr)
        return ExitCode.MISSING_RESPONSES
    except BudgetReached as exc:
        print(f"fairness-tests: {exc}", file=sys.stderr)
        return ExitCode.BUDGET
    except FairnessTestsError as exc:
        print(f"fairness-tests: error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:        # noqa: BLE001  a bug: one line, the traceback in a file
        print(internal_error(exc, argv), file=sys.stderr)
        return ExitCode.INTERNAL
    finally:
        if args.project_dir:
            if before is None:
                os.environ.pop(ENV_PROJECT_DIR, None)
            else:
                os.environ[ENV_PROJECT_DIR] = before
    return int(rc or 0)


def internal_error(exc: BaseException, argv: list[str] | None) -> str:
    """Write the traceback of an unexpected ``exc`` to a new log file (in the temporary
    directory) and return the one line that names it."""
    fd, path = tempfile.mkstemp(prefix="fairness-tests-crash-", suffix=".log")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(f"fairness-tests {__version__}\ncommand: fairness-tests "
                f"{' '.join(sys.argv[1:] if argv is None else argv)}\n\n")
        f.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    what = str(exc).splitlines()[0] if str(exc) else ""
    return (f"fairness-tests: internal error: {type(exc).__name__}"
            f"{': ' + what[:200] if what else ''} (a bug, not a verdict: the traceback is in "
            f"{path}; please report it with that file)")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
