"""``fairness-tests init``: set up the fairness suite in a user's repository.

Writes (relative to ``--dir``, default the current directory; an existing file is
kept unless ``--force``)::

    thresholds/default.yaml                 the project's rules (a copy of the packaged file:
                                            none yet, its comments give the format; a
                                            benchmark's own rules are read first)
    thresholds/models/<model>.yaml          the packaged override matching the model, or a
                                            commented empty override
    tests/test_fairness.py                  pulls in the suite (fairness_tests.suite.everything)
    tests/__snapshots__/test_fairness/      the embedded model's reviewed drift snapshots
                                            (only for the embedded model)
    benchmarks/README.md, benchmarks/*.yaml a team's own benchmarks (--benchmark FILE): how to
                                            write one, and each registered benchmark's example
    fixtures/recordings/manifest.yaml       where the model's recordings will be listed
    fixtures/cards/<model>.yaml             what a run cannot know for its Fairness Card
                                            (not for the embedded model: the package has it)
    pyproject.toml                          [tool.pytest.ini_options]: fairness_model, ...
    .github/workflows/fairness-gate.yml     the CI job: suite, drift, gate, card artifact

The directory then is a project directory (it holds ``thresholds/``), so its files
override the packaged defaults (:mod:`fairness_tests.core.project`), and ``pytest`` there
runs the suite on the model, replaying what is recorded.
"""
from __future__ import annotations

import importlib.resources
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from fairness_tests.cli.command import add_command
from fairness_tests.core.paths import data_path
from fairness_tests.core.project import model_slug
from fairness_tests.core.registry import load_all
from fairness_tests.core.version import __version__
from fairness_tests.pipeline.config import DEFAULT_BENCHMARKS, DEFAULT_MODEL
from fairness_tests.pipeline.config_data import FETCHABLE
from fairness_tests.pipeline.config_tools import InitConfig
from fairness_tests.rules.thresholds import override_applies

PYTEST_TABLE = "[tool.pytest.ini_options]"


@dataclass
class InitResult:
    written: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)      # existed; not overwritten
    notes: list[str] = field(default_factory=list)


def ini_lines(model: str) -> list[str]:
    """The ``[tool.pytest.ini_options]`` keys init sets (the command line wins)."""
    return [
        f"fairness_model = {json.dumps(model)}",
        'fairness_thresholds = "thresholds"',
        'fairness_store = ".fairness/store.sqlite"',
        "# a model whose responses are not recorded fails (record with --fairness-live)",
        'fairness_on_missing = "fail"',
        "# also: fairness_backend, fairness_repeats, fairness_benchmarks, fairness_report,",
        "#       fairness_baseline_model (see `pytest --help`, group \"fairness\")",
    ]


def _matching_override(model: str) -> Path | None:
    """The packaged ``thresholds/models/*.yaml`` whose model pattern matches ``model``."""
    for p in sorted(data_path("thresholds", "models").glob("*.y*ml")):
        if override_applies(p, model):
            return p
    return None


def glob_literal(model: str) -> str:
    """``model`` as a ``model:`` pattern of an override that matches only itself
    (fnmatch's ``*``, ``?`` and ``[`` each in brackets)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in model)


def _override_text(model: str) -> str:
    return (f"# Per-model changes to the rules in force (the benchmarks' own, then\n"
            f"# thresholds/default.yaml) for {model}.\n"
            "# Only the keys given change; a new id must be a complete rule. Declare a known\n"
            "# failure with its measured reason, so it runs as a strict xfail:\n"
            "#   - id: accuracy_floor_ambig\n"
            "#     expected_fail: {reason: \"...\", cells: [\"Race_x_gender/*\"]}\n"
            "# See docs/pytest.md of fairness_tests for the format.\n"
            f"model: {json.dumps(glob_literal(model))}\n"
            "rules: []\n")


MANIFEST_TEXT = """\
# Recorded responses of this repository's models, replayed by default (no model call).
# After a live run (pytest --fairness-live, or fairness-tests audit --live):
#   fairness-tests store export fixtures/recordings/<model>.jsonl.gz
# and list the file here:
#   - model: "openai/gpt-4o-mini"
#     files: [openai-gpt-4o-mini.jsonl.gz]
#     settings: {}            # audit settings the recording was made with, if not the defaults
recordings: []
"""


def init_project(root: str | Path = ".", model: str = DEFAULT_MODEL,
                 force: bool = False) -> InitResult:
    """Write the files listed in the module docstring into ``root``."""
    root = Path(root)
    res = InitResult()
    slug = model_slug(model)

    def put(rel: str, text: str | None = None, src: Path | None = None) -> None:
        dest = root / rel
        if dest.exists() and not force:
            res.kept.append(dest)
            return
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src is not None:
            shutil.copyfile(src, dest)
        else:
            dest.write_text(text or "", encoding="utf-8")
        res.written.append(dest)

    put("thresholds/default.yaml", src=data_path("thresholds", "default.yaml"))
    override = _matching_override(model)
    if override is not None:
        put(f"thresholds/models/{slug}.yaml", src=override)
    else:
        put(f"thresholds/models/{slug}.yaml", _override_text(model))
    put("tests/test_fairness.py", src=data_path("init", "test_fairness.py.tmpl"))
    put("benchmarks/README.md", src=data_path("init", "benchmarks_README.md"))
    for cls in load_all():                 # a benchmark's worked example (``example``)
        example = cls.example
        if example:
            put(f"benchmarks/{Path(example).name}",
                src=Path(str(importlib.resources.files(cls.__module__).joinpath(example))))
    if model == DEFAULT_MODEL:
        snaps = Path(str(importlib.resources.files("fairness_tests.suite")
                         / "__snapshots__" / "test_drift"))
        for snap in sorted(snaps.glob("*.txt")):
            put(f"tests/__snapshots__/test_fairness/{snap.name}", src=snap)
    else:
        put("fixtures/recordings/manifest.yaml", MANIFEST_TEXT)
        put(f"fixtures/cards/{slug}.yaml", src=data_path("card_user_example.yaml"))
        res.notes.append(f"no recordings of {model} yet: record them with "
                         f"`pytest --fairness-live` (or `fairness-tests audit --live --model "
                         f"{model}`), then `pytest --snapshot-update` to write its drift "
                         "snapshots, and list the export in fixtures/recordings/manifest.yaml")
    major, minor = (int(x) for x in __version__.split(".")[:2])
    workflow = data_path("init", "fairness-gate.yml.tmpl").read_text(encoding="utf-8")
    workflow = (workflow.replace("@MODEL@", model).replace("@VERSION@", __version__)
                .replace("@NEXT@", f"{major}.{minor + 1}" if major == 0 else f"{major + 1}"))
    put(".github/workflows/fairness-gate.yml", workflow)
    _pytest_ini(root, model, res)
    _gitignore(root, res)
    return res


def _pytest_ini(root: Path, model: str, res: InitResult) -> None:
    """Add ``[tool.pytest.ini_options]`` to pyproject.toml; when the table exists
    already, print the lines to add instead of editing the user's table."""
    pp = root / "pyproject.toml"
    block = PYTEST_TABLE + "\n" + "\n".join(ini_lines(model)) + "\n"
    if not pp.exists():
        pp.write_text(block, encoding="utf-8")
        res.written.append(pp)
        return
    text = pp.read_text(encoding="utf-8")
    if PYTEST_TABLE in text:
        if "fairness_model" not in text:
            res.notes.append(f"{pp} has a {PYTEST_TABLE} table already; add these lines "
                             "to it:\n    " + "\n    ".join(ini_lines(model)))
        res.kept.append(pp)
        return
    pp.write_text(text.rstrip("\n") + "\n\n" + block, encoding="utf-8")
    res.written.append(pp)


def _gitignore(root: Path, res: InitResult) -> None:
    gi = root / ".gitignore"
    lines = gi.read_text(encoding="utf-8").splitlines() if gi.exists() else []
    if ".fairness/" in lines:
        return
    gi.write_text("\n".join(lines + ["# fairness_tests: response store, session cache",
                                     ".fairness/"]) + "\n", encoding="utf-8")
    res.written.append(gi)


# --------------------------------------------------------------------------- CLI

def register(subparsers) -> None:
    add_command(subparsers, "init", InitConfig, _cmd_init,
                help="set up the fairness suite in a repository (thresholds, tests, pytest "
                     "settings, CI workflow)")


def _cmd_init(c: InitConfig) -> int:
    res = init_project(c.dir, model=c.model, force=c.force)
    root = Path(c.dir)
    for p in res.written:
        print(f"wrote {p.relative_to(root).as_posix()}")
    for p in res.kept:
        print(f"kept  {p.relative_to(root).as_posix()} (exists; --force overwrites)")
    if model_slug(c.model) != c.model:
        print(f"note: model id {c.model!r} is written as the file name "
              f"{model_slug(c.model)!r} (thresholds/models/, fixtures/cards/)")
    for n in res.notes:
        print(f"note: {n}")
    print(next_steps())
    return 0


def next_steps() -> str:
    """What to run after ``init``: the data of the default benchmarks that install
    theirs (the suite stops without it; the first fetchable one is ``data fetch``'s
    default), each where its commands then look, then pytest."""
    lines = ["next: the default benchmarks' data (verified against the official release), "
             "then the suite:"]
    for name in (n for n in FETCHABLE if n in DEFAULT_BENCHMARKS):
        which = "" if name == FETCHABLE[0] else f" --benchmark {name}"
        lines += [f"    fairness-tests data fetch{which} --dest .fairness/{name}".ljust(55)
                  + "# offline: add --from DIR (a local copy)",
                  f"    export FAIRNESS_{name.upper()}_DIR=$PWD/.fairness/{name}"]
    lines.append("    python -m pytest -n auto".ljust(55) + "# replays the recorded responses")
    return "\n".join(lines)
