"""The configuration spec, enumerated: every option of every command is exposed by every
entry point it declares (command line, pytest option, ini key, ``[tool.fairness_tests]``
key, Python API), and each entry point rejects a bad value with the same message, spelled
its own way."""
from __future__ import annotations

import argparse
import math

import pytest
from _pytest.config.argparsing import Parser

from fairness_tests.cli.main import build_parser, main
from fairness_tests.core.errors import ConfigError
from fairness_tests.core.option_sources import (
    add_pytest_options,
    cli_flags,
    pytest_layers,
    toml_layer,
)
from fairness_tests.core.options import Layer, OptionErrors, build, specs
from fairness_tests.core.registry import BENCHMARK_NAMES
from fairness_tests.pipeline.benchmark import benchmarks
from fairness_tests.pipeline.config import COMMANDS, DEFAULT_MODEL, AuditConfig, PluginOptions
from fairness_tests.pipeline.config_tools import TOOLS
from fairness_tests.pipeline.configure import (
    audit_config,
    benchmark_configs,
    command_config,
    project_layers,
)
from fairness_tests.plugin.options import settings_from


def _commands() -> dict[type, list[str]]:
    """Each configuration class -> the words of the subcommand built from it."""
    out: dict[type, list[str]] = {}

    def walk(parser: argparse.ArgumentParser, words: list[str]) -> None:
        cls = parser.get_default("config_class")
        if cls is not None:
            out[cls] = words
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*words, name])
    walk(build_parser(), [])
    return out


COMMAND_WORDS = _commands()
#: the configuration classes of the benchmarks' own commands (``Benchmark.commands``:
#: ``fairness-tests NAME ...``), found on the command line
BENCHMARK_CLASSES = [c for c, words in COMMAND_WORDS.items()
                     if words[0] in {b.name for b in benchmarks() if b.commands}]
CLI_CLASSES = list(dict.fromkeys(
    [c for c in (*COMMANDS, *TOOLS) if c is not PluginOptions] + BENCHMARK_CLASSES))


def _bad_values(spec) -> list[object]:
    """Values outside the option's type, choices or range (none for free strings)."""
    o, k = spec.option, spec.kind
    bad: list[object] = []
    if k.base in (int, float) and not k.words:
        bad.append("many")
        for bound, delta in ((o.ge, -1), (o.gt, 0), (o.le, 1), (o.lt, 0)):
            if bound is not None:
                bad.append(bound + delta if k.base is float or delta else int(bound) + delta)
        if k.base is int:
            bad.append("1.5")
    elif k.base is int and k.words:
        bad.append("sometimes")
    if k.choices or o.choices:
        bad.append("vibes")
    return bad


def _required_argv(cls) -> list[str]:
    """Placeholder values of the required options and positionals of ``cls``."""
    argv = []
    for name, s in specs(cls).items():
        if s.default is None and not s.kind.optional and s.option.cli:
            value = ["x", "y"] if s.kind.many else ["x"]
            argv += value if s.option.positional else [cli_flags(cls, name)[0], *value]
    return argv


CASES = [(cls, name, bad) for cls in CLI_CLASSES for name, s in specs(cls).items()
         for bad in _bad_values(s) if s.option.cli]


def test_every_command_class_is_a_subcommand():
    assert set(CLI_CLASSES) <= set(COMMAND_WORDS), set(CLI_CLASSES) - set(COMMAND_WORDS)
    assert len(CASES) > 60
    words = [COMMAND_WORDS[c] for c in BENCHMARK_CLASSES]
    assert {w[0] for w in words} == {b.name for b in benchmarks() if b.commands}
    assert {("bbq", "score"), ("kobbq", "score"), ("generative", "score")} <= set(map(tuple,
                                                                                    words))


def test_a_benchmark_commands_project_keys_are_known():
    """The ``[tool.fairness_tests]`` keys are checked against the options of
    :data:`COMMANDS`, ``TOOLS`` and the benchmarks' own commands' (``Benchmark.configs``):
    every configuration class on a benchmark's command line is declared there, else a
    project's key for it would be refused as unknown."""
    assert set(BENCHMARK_CLASSES) <= set(benchmark_configs()), \
        set(BENCHMARK_CLASSES) - set(benchmark_configs())


def test_a_project_key_only_a_benchmark_command_reads_is_accepted(tmp_path, monkeypatch):
    """``require_official`` is an option of ``bbq filter`` only (no shared command has
    it): a project that sets it is a valid project; a misspelt key is still refused."""
    (tmp_path / "thresholds").mkdir()
    (tmp_path / "pyproject.toml").write_text("[tool.fairness_tests]\nrequire_official = true\n")
    monkeypatch.chdir(tmp_path)
    assert "require_official" not in {n for c in (*COMMANDS, *TOOLS) for n in specs(c)}
    assert project_layers(AuditConfig) != []
    (tmp_path / "pyproject.toml").write_text("[tool.fairness_tests]\nrequire_oficial = true\n")
    with pytest.raises(ConfigError, match="require_oficial"):
        project_layers(AuditConfig)


@pytest.mark.parametrize("cls,name,bad", CASES,
                         ids=[f"{c.__name__}-{n}-{b}" for c, n, b in CASES])
def test_the_command_line_and_the_python_api_reject_a_bad_value_alike(cls, name, bad, capsys):
    with pytest.raises(OptionErrors) as api:
        cls(**{name: bad} | {n: "x" if not s.kind.many else ("x", "y")
                              for n, s in specs(cls).items()
                              if s.default is None and not s.kind.optional and n != name})
    api_message = dict(api.value.problems_by_field)[name]
    s = specs(cls)[name]
    flag = [] if s.option.positional else [cli_flags(cls, name)[0]]
    argv = [*COMMAND_WORDS[cls], *[a for a in _required_argv(cls)], *flag, str(bad)]
    if s.option.positional:
        argv = [*COMMAND_WORDS[cls], *_required_argv(cls)]
        return                                    # positionals are free strings
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1, err                       # one line
    spelled = f"{cli_flags(cls, name)[0]}: {api_message}"
    assert spelled.replace(repr(bad), repr(str(bad))) in err or spelled in err, err


PYTEST_CASES = [(cls, name, bad) for cls in (AuditConfig, PluginOptions)
                for name, s in specs(cls).items() if s.option.pytest
                for bad in _bad_values(s)]


def _pytest_parser() -> Parser:
    parser = Parser(_ispytest=True)
    group = parser.getgroup("fairness")
    for cls in (PluginOptions, AuditConfig):
        add_pytest_options(parser, group, cls)
    return parser


def test_pytest_exposes_every_pytest_option_as_a_flag_and_an_ini_key():
    parser = _pytest_parser()
    flags = {o for opt in parser.getgroup("fairness").options for o in opt.names()}
    for cls in (AuditConfig, PluginOptions):
        for name, s in specs(cls).items():
            if s.option.pytest:
                assert s.option.pytest_flag(name) in flags, name
                assert s.option.ini_key(name) in parser._inidict, name
    # the audit's options that a pytest session cannot use are declared so
    missing = [n for n, s in specs(AuditConfig).items() if not s.option.pytest]
    assert sorted(missing) == ["export", "progress", "recordings", "shard"]


@pytest.mark.parametrize("cls,name,bad", PYTEST_CASES,
                         ids=[f"{c.__name__}-{n}-{b}" for c, n, b in PYTEST_CASES])
def test_pytest_options_and_ini_keys_reject_a_bad_value_alike(cls, name, bad):
    s = specs(cls)[name]
    given = [str(bad)] if (s.kind.many or s.option.per_model) else str(bad)
    dest = s.option.ini_key(name)
    with pytest.raises(OptionErrors) as api:
        build(cls, [Layer({name: bad}, lambda n: n)])
    expected = dict(api.value.problems_by_field)[name]
    for getoption, getini, spelled in (
            (lambda d: given if d == dest else None, lambda d: None, s.option.pytest_flag(name)),
            (lambda d: None, lambda d: given if d == dest else None, f"ini {dest}")):
        with pytest.raises(ConfigError) as e:
            build(cls, pytest_layers(cls, getoption, getini))
        assert f"{spelled}: {expected}" in str(e.value)


def test_a_pyproject_table_value_is_checked_like_the_command_line():
    with pytest.raises(OptionErrors) as e:
        build(AuditConfig, [toml_layer(AuditConfig, {"n_boot": 5, "rotations": "some"},
                                       "pyproject.toml [tool.fairness_tests]")])
    assert str(e.value) == ("pyproject.toml [tool.fairness_tests] n_boot: must be >= 100, "
                            "got 5; pyproject.toml [tool.fairness_tests] rotations: must be "
                            "one of none, sample, all, got 'some' (did you mean 'sample'?)")


def test_every_problem_of_a_command_line_in_one_line(capsys):
    assert main(["audit", "--n-boot", "-5", "--workers", "0", "--repeats", "0",
                 "--benchmarks", "bbq", "vibes", "--temperature", "nan"]) == 2
    err = capsys.readouterr().err
    assert err == (f"fairness-tests: error: --benchmarks: must be one of "
                   f"{', '.join(BENCHMARK_NAMES)}, got 'vibes'; --workers: must be >= 1, got "
                   "0; --n-boot: must be >= 100, got -5; --temperature: must be a finite "
                   "number, got 'nan'; --repeats: must be >= 1, got 0\n")


def test_cross_field_rules_name_the_option_as_given(capsys):
    assert main(["audit", "--repeat-mode", "n", "--rpm", "10"]) == 2
    err = capsys.readouterr().err
    assert "--rpm: applies to API models (backend litellm)" in err
    assert "--repeat-mode: applies to API models (backend litellm)" in err
    with pytest.raises(OptionErrors, match="repeat_mode=: applies to API models"):
        AuditConfig(repeat_mode="n")
    with pytest.raises(OptionErrors, match=r"shard=: must be I/N with 1 <= I <= N, got '4/3'"):
        AuditConfig(model="openai/x", live=True, shard="4/3")


def test_defaults_are_valid_and_numbers_are_converted_once():
    for cls in (*COMMANDS, *TOOLS):
        required = {n: ("x", "y") if s.kind.many else "x" for n, s in specs(cls).items()
                    if s.default is None and (not s.kind.optional or n in ("run", "out"))}
        cls(**required)
    c = build(AuditConfig, [Layer({"n_boot": "300", "temperature": "0.5", "gen_seeds": ["1", "2"],
                                   "workers": "auto", "live": "true"}, lambda n: n)])
    assert (c.n_boot, c.temperature, c.gen_seeds, c.workers, c.live) == \
        (300, 0.5, (1, 2), "auto", True)
    assert math.isclose(AuditConfig(temperature=1).temperature, 1.0)


@pytest.mark.parametrize("given", [["crows_pairs,winobias"], ["crows_pairs", "winobias"],
                                   ["crows_pairs,", "winobias"]])
def test_a_list_of_fixed_words_takes_commas_or_spaces(given):
    """``--benchmarks crows_pairs,winobias`` (the issue's spelling) is
    ``--benchmarks crows_pairs winobias``; an unknown word in a comma list is still named."""
    args = build_parser().parse_args(["audit", "--benchmarks", *given])
    assert command_config(AuditConfig, args).benchmarks == ("crows_pairs", "winobias")
    with pytest.raises(ConfigError, match="got 'winobiass'"):
        AuditConfig(benchmarks=("crows_pairs,winobiass",))


def test_a_benchmarks_own_option_in_a_default_layer_is_for_the_runs_that_ask_it(
        tmp_path, monkeypatch):
    """The project's table (and a model's recording settings) set a benchmark's own
    options for the runs that ask it; a run that asks other benchmarks builds without
    them. Given on the command line (or the Python API), the same option is an error."""
    (tmp_path / "thresholds").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        "[tool.fairness_tests]\ngen_max_new_tokens = 32\nbbq_filter = \"none\"\n")
    monkeypatch.chdir(tmp_path)
    bbq_only = audit_config(benchmarks=("bbq",))
    assert (bbq_only.bbq_filter, bbq_only.gen_max_new_tokens) == ("none", None)
    gen_only = audit_config(benchmarks=("generative",))
    assert (gen_only.bbq_filter, gen_only.gen_max_new_tokens) == ("intersectional", 32)
    both = audit_config(benchmarks=("bbq", "generative"))
    assert (both.bbq_filter, both.gen_max_new_tokens) == ("none", 32)
    with pytest.raises(OptionErrors, match="gen_max_new_tokens=: applies to generative and "
                                           "probe, which this run does not ask"):
        audit_config(benchmarks=("bbq",), gen_max_new_tokens=32)


def test_the_probe_takes_the_generative_protocols_reductions():
    """The probe reads ``--gen-seeds``, ``--gen-max-new-tokens`` and ``--gen-limit``:
    a probe-only run takes them (it was refused as "applies to generative")."""
    c = AuditConfig(benchmarks=("probe",), gen_seeds=(1,), gen_limit=4, gen_max_new_tokens=8)
    assert (c.gen_seeds, c.gen_limit, c.gen_max_new_tokens) == ((1,), 4, 8)


def test_the_pytest_ini_file_sets_a_benchmarks_option_for_the_runs_that_ask_it(
        tmp_path, monkeypatch):
    """An ini key (the project's standing configuration) for a benchmark the session
    does not ask is left out; the same option on pytest's command line is a usage error."""
    monkeypatch.chdir(tmp_path)

    def session(ini: dict, cli: dict):
        return settings_from(lambda dest: cli.get(dest), lambda key: ini.get(key, ""),
                             lambda d: d)
    ini = {"fairness_gen_max_new_tokens": "32"}
    asked = {"fairness_benchmarks": ["bbq"]}
    audit = session(ini, asked).audit(DEFAULT_MODEL)
    assert audit.benchmarks == ("bbq",) and audit.gen_max_new_tokens is None
    both = session(ini, {"fairness_benchmarks": ["bbq", "generative"]}).audit(DEFAULT_MODEL)
    assert both.gen_max_new_tokens == 32
    with pytest.raises(OptionErrors, match="--fairness-gen-max-new-tokens: applies to "
                                           "generative and probe"):
        session({}, {**asked, "fairness_gen_max_new_tokens": 32})
