"""``fairness-tests card``: write, validate, render, diff, with the documented exit codes."""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from card_testdata import make_run  # noqa: E402

from fairness_tests.benchmarks.bbq.data import bbq_dir  # noqa: E402
from fairness_tests.card.sections.facts import RunFacts  # noqa: E402
from fairness_tests.cli.card import register  # noqa: E402
from fairness_tests.cli.main import main  # noqa: E402
from fairness_tests.core.io import OUTPUT_MARKER  # noqa: E402
from fairness_tests.core.option_sources import from_namespace  # noqa: E402
from fairness_tests.core.paths import DATA_DIR, fairness_cards_dir  # noqa: E402
from fairness_tests.run.metadata import RunMetadata, Source  # noqa: E402

EXAMPLE_USER = DATA_DIR / "card_user_example.yaml"


@pytest.fixture()
def runs(tmp_path):
    base = make_run().save(tmp_path / "base")
    cand = make_run(candidate=True).save(tmp_path / "cand")
    return base, cand


def _card(runs, tmp_path, which=0, user=True):
    out = tmp_path / f"card{which}"
    args = ["card", "--run", str(runs[which]), "--out", str(out)]
    if user:
        args += ["--user-yaml", str(EXAMPLE_USER)]
    assert main(args) == 0
    return out


def test_card_writes_three_files(runs, tmp_path, capsys):
    out = _card(runs, tmp_path)
    assert sorted(p.name for p in out.iterdir()) == [OUTPUT_MARKER, "card.html", "card.md",
                                                     "card.yaml", "tables"]   # + linked CSVs
    printed = capsys.readouterr().out.split()
    assert printed == [str(out / "card.yaml"), str(out / "card.md"), str(out / "card.html")]


def test_incomplete_card_is_written_and_says_so(runs, tmp_path, capsys):
    out = _card(runs, tmp_path, user=False)
    err = capsys.readouterr().err
    assert "incomplete" in err and "intended_use.in_scope" in err
    assert main(["card", "validate", str(out / "card.yaml")]) == 0
    assert main(["card", "validate", "--complete", str(out / "card.yaml")]) == 1


def test_validate_published_and_broken_cards(tmp_path, capsys):
    qwen = fairness_cards_dir() / "cards" / "qwen2.5-7b-instruct.yaml"
    assert main(["card", "validate", "--complete", str(qwen)]) == 0
    assert "valid and complete" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text(qwen.read_text().replace("modality: text", "modality: smell"))
    assert main(["card", "validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "key 'modality'" in err and "line 12" in err


def test_not_a_run_directory_is_exit_2(tmp_path, capsys):
    (tmp_path / "notarun").mkdir()
    assert main(["card", "--run", str(tmp_path / "notarun"), "--out", str(tmp_path / "o")]) == 2
    assert "run.json" in capsys.readouterr().err


@pytest.mark.parametrize("edit, key", [
    (lambda raw: raw.update(schema_version=1), "'schema_version'"),
    (lambda raw: raw["generative"].update(decoding_regimes=[[0.2, 0.9]]),
     "'generative.decoding_regimes'"),
])
def test_run_json_of_another_shape_is_exit_2_naming_file_and_key(runs, tmp_path, capsys, edit,
                                                                  key):
    meta = runs[0] / "run.json"
    raw = json.loads(meta.read_text())
    edit(raw)
    meta.write_text(json.dumps(raw))
    assert main(["card", "--run", str(runs[0]), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "run.json" in err and key in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(not (bbq_dir() / "Race_x_SES.jsonl").exists(), reason="../shared/bbq absent")
def test_card_of_someone_elses_predictions_lists_prompt_facts_as_missing(tmp_path, capsys):
    """``bbq score --out`` on predictions made by another tool: the card says whose answers
    they are (file and sha256) and lists the prompt, decoding and date as missing; it never
    fills in this package's prompt template or decoding."""
    rows = []
    for ds in ("Race_x_SES", "Race_x_gender"):
        for line in (bbq_dir() / f"{ds}.jsonl").read_text(encoding="utf-8").splitlines()[:40]:
            item = json.loads(line)
            rows.append({"category": ds, "example_id": item["example_id"],
                         "answer": item["label"] if item["example_id"] % 2 else 0})
    preds = tmp_path / "theirs.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run_dir, out = tmp_path / "run", tmp_path / "card"
    assert main(["bbq", "score", "--no-rules", "--predictions", str(preds), "--filter", "none",
                 "--n-boot", "100", "--model", "their-model", "--out", str(run_dir)]) == 0
    assert main(["card", "--run", str(run_dir), "--out", str(out)]) == 0
    capsys.readouterr()
    card = yaml.safe_load((out / "card.yaml").read_text(encoding="utf-8"))
    sha = hashlib.sha256(preds.read_bytes()).hexdigest()
    source = card["evaluation_protocol"]["source"]
    assert (source["kind"], source["mode"], source["sha256"]) == ("predictions", "scored", sha)
    assert source["file"].endswith("theirs.jsonl")
    assert "someone else's predictions" in source["statement"] and sha in source["statement"]
    assert "by fairness-tests bbq score;" in source["statement"]
    missing = {m["field"]: m for m in card["missing_fields"]}
    for field in ("prompt_suite.families[0].template", "decoding.regimes[0].temperature",
                  "decoding.regimes[0].top_p", "evaluation_date"):
        assert missing[field]["source"] == "run", field
        assert "theirs.jsonl" in missing[field]["hint"], field
    assert missing["system.surface"]["source"] == "user"          # no backend asked the model
    fam = card["prompt_suite"]["families"][0]
    assert "template" not in fam and "not known to this run" in fam["description"]
    regime = card["decoding"]["regimes"][0]
    assert "temperature" not in regime and "top_p" not in regime
    assert "seed" not in card["evaluation_protocol"]["bbq"]      # no answer-sampling seed known
    assert "seeds" not in card["reproducibility"] and "backend" not in card["system"]
    md = (out / "card.md").read_text(encoding="utf-8")
    assert "Answer with one letter" not in md and "zero-shot" not in md      # nothing invented
    assert "**MISSING** `prompt_suite.families[0].template`" in md
    assert "someone else's predictions" in md
    assert main(["card", "validate", str(out / "card.yaml")]) == 0


def test_bad_user_yaml_is_exit_2(runs, tmp_path, capsys):
    user = tmp_path / "u.yaml"
    user.write_text("intended_use:\n  in_scope: [x]\n  out_of_scope: [y]\nmodel: mine\n")
    assert main(["card", "--run", str(runs[0]), "--user-yaml", str(user),
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "u.yaml" in err and "line 4" in err and "'model'" in err


def test_diff_and_exit_code(runs, tmp_path, capsys):
    a = _card(runs, tmp_path, 0) / "card.yaml"
    b = _card(runs, tmp_path, 1) / "card.yaml"
    capsys.readouterr()
    assert main(["card", "diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "regressed" in out and "F4" in out
    assert main(["card", "diff", str(a), str(b), "--exit-code"]) == 1
    assert main(["card", "diff", str(a), str(a), "--exit-code"]) == 0
    capsys.readouterr()
    assert main(["card", "diff", str(a), str(b), "--format", "markdown"]) == 0
    assert "| **REGRESSED** |" in capsys.readouterr().out


def test_render_from_yaml_reproduces_md_and_html(runs, tmp_path):
    out = _card(runs, tmp_path)
    again = tmp_path / "again"
    assert main(["card", "render", str(out / "card.yaml"), "--out", str(again)]) == 0
    for name in ("card.md", "card.html"):
        assert (again / name).read_bytes() == (out / name).read_bytes()
    assert not (again / "card.yaml").exists()


def test_register_alone_builds_a_parser():
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["card", "diff", "a", "b"])
    c = from_namespace(args.config_class, args)
    assert (c.baseline, c.candidate, c.format) == ("a", "b", "terminal")
    args = parser.parse_args(["card", "--run", "r", "--out", "o"])
    c = from_namespace(args.config_class, args)
    assert (c.run, c.out, args.card_command) == ("r", "o", None)


@pytest.mark.skipif(shutil.which("fairness-tests") is None, reason="console script not installed")
def test_console_script(runs, tmp_path):
    out = tmp_path / "cs"
    r = subprocess.run(["fairness-tests", "card", "--run", str(runs[0]), "--user-yaml",
                        str(EXAMPLE_USER), "--out", str(out)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert (out / "card.html").exists()


def test_a_scored_run_names_the_command_that_scored_it():
    """A KoBBQ run scored from someone's predictions was described as "someone else's
    BBQ predictions ... by fairness-tests bbq score": the command is the run's own."""
    meta = RunMetadata(model=None, backend=None, mode="scored",
                       source=Source(kind="predictions", file="theirs.tsv", sha256="ab"),
                       fairness_tests_version="0", regen_command="fairness-tests kobbq score "
                       "theirs.tsv --prompt-id 2")
    said = RunFacts(meta, {}, pd.DataFrame()).scored_from()
    assert said == ("someone else's predictions, read from theirs.tsv (sha256 ab) by "
                    "fairness-tests kobbq score")
