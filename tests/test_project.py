"""Install anywhere: packaged defaults found through importlib.resources, a project
directory overriding them, and a manifest whose ``files`` say what each model replays.

The old code found every default through ``REPO_DIR = PACKAGE_DIR.parent`` (outside
site-packages after a regular install) and imported every recording file for every
model; these tests pin the new contract."""
from __future__ import annotations

import gzip
import importlib.resources
import json
from pathlib import Path
from textwrap import dedent

import pytest

from fairness_tests.card.files import default_user_yaml
from fairness_tests.core.errors import ConfigError
from fairness_tests.core.paths import data_path, fairness_cards_dir
from fairness_tests.core.project import ENV_PROJECT_DIR, find_project, packaged_thresholds_dir
from fairness_tests.pipeline.configure import audit_config
from fairness_tests.pipeline.recordings import default_recordings, recording_settings
from fairness_tests.rules import load_rules

EMBEDDED = "embedded:gemma-3-270m"


@pytest.fixture
def empty_cwd(tmp_path, monkeypatch):
    d = tmp_path / "empty"
    d.mkdir()
    monkeypatch.chdir(d)
    monkeypatch.delenv(ENV_PROJECT_DIR, raising=False)
    return d


def test_defaults_are_package_data_found_through_importlib_resources():
    pkg = Path(str(importlib.resources.files("fairness_tests")))
    for parts in (("thresholds", "default.yaml"), ("thresholds", "models",
                                                    "embedded-gemma-3-270m.yaml"),
                  ("recordings", "manifest.yaml"), ("cards", "embedded-gemma-3-270m.yaml"),
                  ("suites", "default.yaml"), ("rubrics", "published.json"),
                  ("probes", "counterfactual.json"), ("card_schema", "core.yaml")):
        p = data_path(*parts)
        assert p.is_file(), p
        assert p.is_relative_to(pkg)            # inside the package, not beside it


def test_no_project_means_the_packaged_defaults(empty_cwd):
    proj = find_project()
    assert proj.root is None
    assert proj.thresholds_dir() == packaged_thresholds_dir()
    rs = load_rules(model=EMBEDDED)
    assert rs.thresholds_files[0] == str(packaged_thresholds_dir() / "default.yaml")
    assert recording_settings(EMBEDDED)["gen_max_new_tokens"] == 96
    assert default_user_yaml(EMBEDDED) == str(data_path("cards", "embedded-gemma-3-270m.yaml"))


def _threshold_dir(root: Path, bound: float) -> None:
    (root / "thresholds" / "models").mkdir(parents=True)
    (root / "thresholds" / "default.yaml").write_text(dedent(f"""\
        rules:
          - id: only_rule
            table: bbq
            metric: accuracy
            op: ">="
            bound: {bound}
            rationale: the project's own rule
        """))


def test_a_directory_with_thresholds_is_a_project_and_replaces_them_whole(empty_cwd):
    _threshold_dir(empty_cwd, 0.7)
    proj = find_project()
    assert proj.root == empty_cwd
    rs = load_rules(model=EMBEDDED)
    # whole-directory semantics: the packaged Gemma override does not leak in
    # (beside the benchmarks' own rules, which apply only to runs with their tables)
    assert [r.id for r in rs.rules if not r.optional] == ["only_rule"]
    assert rs.thresholds_files == [str(empty_cwd / "thresholds" / "default.yaml")]


def test_pyproject_table_moves_the_locations_and_is_validated(empty_cwd):
    (empty_cwd / "fair").mkdir()
    _threshold_dir(empty_cwd / "fair", 0.8)
    pp = empty_cwd / "pyproject.toml"
    pp.write_text('[project]\nname = "x"\n\n'
                  '[tool.fairness_tests]\nthresholds = "fair/thresholds"\n')
    assert load_rules().get("only_rule").bound == 0.8
    pp.write_text('[tool.fairness_tests]\nthreshold = "fair/thresholds"\ncard = "x"\n')
    with pytest.raises(ConfigError) as e:       # every entry point builds its configuration
        audit_config()                          # through the spec, which checks the keys
    assert len(e.value.problems) == 2
    assert "pyproject.toml [tool.fairness_tests]" in str(e.value)
    assert "unknown key 'threshold' (did you mean 'thresholds'?)" in str(e.value)
    pp.write_text('[tool.fairness_tests]\nthresholds = "nowhere"\n')
    with pytest.raises(ConfigError, match=r"pyproject.toml, key 'tool.fairness_tests.thresholds'"):
        find_project()


def test_explicit_project_dir_wins_over_the_current_directory(empty_cwd, tmp_path, monkeypatch):
    other = tmp_path / "other"
    _threshold_dir(other, 0.9)
    monkeypatch.setenv(ENV_PROJECT_DIR, str(other))
    assert load_rules().get("only_rule").bound == 0.9
    monkeypatch.setenv(ENV_PROJECT_DIR, str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="project directory does not exist"):
        find_project()


def _jsonl_gz(path: Path, model: str) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps({"model": model}) + "\n")


def test_manifest_lists_the_files_each_model_replays_and_only_those(empty_cwd):
    rec = empty_cwd / "fixtures" / "recordings"
    rec.mkdir(parents=True)
    _jsonl_gz(rec / "a.jsonl.gz", "a")
    _jsonl_gz(rec / "b.jsonl.gz", "b")
    (empty_cwd / "thresholds").mkdir()          # makes the directory a project
    (rec / "manifest.yaml").write_text(dedent("""\
        recordings:
          - model: a
            files: [a.jsonl.gz]
            settings: {benchmarks: [bbq]}
          - model: b
            files: [b.jsonl.gz]
        """))
    assert default_recordings("a") == (str(rec / "a.jsonl.gz"),)
    assert default_recordings("b") == (str(rec / "b.jsonl.gz"),)
    assert default_recordings("c") == ()
    assert recording_settings("a") == {"benchmarks": ("bbq",)}
    # the package's entry for the embedded model is still there behind the project's
    assert default_recordings(EMBEDDED) == (
        str(data_path("recordings", "embedded-gemma-3-270m.jsonl.gz")),)


def test_bad_manifest_reports_every_problem_with_line_and_key(empty_cwd):
    (empty_cwd / "thresholds").mkdir()
    rec = empty_cwd / "fixtures" / "recordings"
    rec.mkdir(parents=True)
    (rec / "manifest.yaml").write_text(dedent("""\
        recordings:
          - model: a
            files: [missing.jsonl.gz]
            settings: {gen_seedz: [1]}
          - model: b
            files: []
            extra: 1
        """))
    with pytest.raises(ConfigError) as e:
        default_recordings("a")
    got = [(p.line, p.key) for p in e.value.problems]
    assert got == [(3, "recordings[0].files[0]"), (4, "recordings[0].settings.gen_seedz"),
                   (6, "recordings[1].files"), (7, "recordings[1].extra")]
    assert "did you mean 'gen_seeds'" in str(e.value)


def test_project_card_yaml_overrides_the_packaged_one(empty_cwd):
    cards = empty_cwd / "fixtures" / "cards"
    cards.mkdir(parents=True)
    (empty_cwd / "thresholds").mkdir()
    (cards / "embedded-gemma-3-270m.yaml").write_text("intended_use: {in_scope: [x]}\n")
    assert default_user_yaml(EMBEDDED) == str(cards / "embedded-gemma-3-270m.yaml")
    assert default_user_yaml("openai/gpt-4o") is None


def test_packaged_probe_is_the_published_probe_verbatim():
    shared = fairness_cards_dir() / "rubric" / "mistral_probe_prompts.json"
    if not shared.exists():
        pytest.skip("no ../shared/fairness_cards beside this checkout")
    assert json.loads(data_path("probes", "counterfactual.json").read_text()) == \
        json.loads(shared.read_text())
