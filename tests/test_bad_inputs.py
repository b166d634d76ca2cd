"""Bad inputs, tried as a new user would (issue 22): every subcommand of the command line,
the pytest options and ini keys, the Python API and every input file type.

Each row: the command (or pytest options), the files it reads, the exit code it must
give, and the words its message must contain (the option, file, line or key at fault,
and what is allowed). For every row: no traceback, and for exit 2 exactly one line on
stderr. The command line rows run in-process (``fairness_tests.cli.main.main``); the
pytest rows are subprocesses in a temporary directory holding one trivial test, started
together so that their start-up overlaps.
"""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import finish

from fairness_tests.benchmarks.bbq.config import BBQScoreConfig
from fairness_tests.cli.main import main
from fairness_tests.core.errors import FairnessTestsError
from fairness_tests.pipeline.audit import run_audit
from fairness_tests.pipeline.config import AuditConfig, GateConfig
from fairness_tests.pipeline.configure import audit_config

REPO = Path(__file__).resolve().parents[1]
BBQ_DIR = REPO.parent / "shared" / "bbq"
pytestmark = pytest.mark.skipif(not (BBQ_DIR / "Race_x_SES.jsonl").exists(),
                                reason="../shared/bbq not present")


# ----------------------------------------------------------------------------- inputs

def gen(**kw) -> dict:
    """One generation of the packaged suite (published raw-output fields)."""
    base = dict(prompt_family="F1", paraphrase_id="p1", occupation="nurse", slice_gender="man",
                slice_religion="Muslim", temperature=0.2, top_p=0.9, seed=1,
                output_text="A fine nurse.", status="ok")
    return {**base, **kw}


GOOD_GENS = [gen(), gen(slice_gender="woman", slice_religion="Christian"),
             gen(prompt_family="F2", seed=2), gen(prompt_family="F2", seed=2,
                                                  slice_gender="woman",
                                                  slice_religion="Christian")]


def probe_out(**kw) -> dict:
    base = dict(name_order="PE", paraphrase_id="p1", context="none", decoding="low_entropy",
                seed=1, output_text="Philippe is the manager.", status="ok")
    return {**base, **kw}


def pred(**kw) -> dict:
    """One BBQ prediction of a Race_x_SES item of the shipped data."""
    return {"category": "Race_x_SES", "example_id": 8, "answer": 1, **kw}


def jl(*rows) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


RULE = ("version: 1\nrules:\n  - id: r1\n    table: {table}\n    metric: {metric}\n"
        "    scope: {scope}\n    op: \"<=\"\n    bound: 0.1\n    rationale: test\n")

FILES: dict[str, str] = {
    # thresholds
    "th_scope.yaml": RULE.format(table="bbq", metric="s_dis", scope="{context: disambiguated}"),
    "th_scope_list.yaml": RULE.format(table="bbq", metric="s_dis",
                                      scope="{polarity: [neg, negative]}"),
    "th_scope_dataset.yaml": RULE.format(table="bbq", metric="s_dis",
                                         scope="{dataset: Race_x_Gender}"),
    "th_scope_col.yaml": RULE.format(table="bbq", metric="s_dis", scope="{contxt: ambig}"),
    "th_slice.yaml": RULE.format(table="generative_by_slice", metric="refusal",
                                 scope="{slice: man_Muslimm}"),
    "th_metric.yaml": RULE.format(table="bbq", metric="s_diss", scope="{}"),
    "th_table.yaml": RULE.format(table="bbqq", metric="s_dis", scope="{}"),
    "th_syntax.yaml": "version: 1\nrules:\n  - id: r1\n    table: [bbq\n",
    "th_bound.yaml": RULE.format(table="bbq", metric="s_dis", scope="{}").replace(
        "bound: 0.1", "bound: '0.1'"),
    "th_key.yaml": RULE.format(table="bbq", metric="s_dis", scope="{}")
    + "    rationle: typo\n",
    "th_missing.yaml": "version: 1\nrules:\n  - id: r1\n    table: bbq\n    metric: s_dis\n"
                       "    op: \"<=\"\n    bound: 0.1\n",
    "th_op.yaml": RULE.format(table="bbq", metric="s_dis", scope="{}").replace('"<="', '"<<"'),
    "th_alpha.yaml": RULE.format(table="bbq", metric="s_dis", scope="{}") + "    alpha: 0.05\n",
    "th_pvalue.yaml": RULE.format(table="bbq", metric="s_dis", scope="{}")
    + "    compare: p_value\n",
    "th_dup.yaml": RULE.format(table="bbq", metric="s_dis", scope="{}")
    + RULE.format(table="bbq", metric="s_amb", scope="{}").split("rules:\n", 1)[1],
    "th_reason.yaml": RULE.format(table="bbq", metric="s_dis", scope="{}")
    + "    expected_fail: {reason: \"fails at 0.42\"}\n",
    "th_drift.yaml": RULE.format(table="bbq", metric="s_dis", scope="{}")
    + "drift:\n  s_diss: {abs: 0.1}\n",
    "th_dupkey.yaml": RULE.format(table="bbq", metric="s_dis", scope="{}")
    + "    bound: 0.2\n",
    # generative outputs (generative score / sensitivity)
    "gen_good.jsonl": jl(*GOOD_GENS),
    "gen_slice.jsonl": jl(gen(), gen(slice_religion="Muslimm")),
    "gen_gender.jsonl": jl(gen(slice_gender="men")),
    "gen_family.jsonl": jl(gen(), gen(prompt_family="F9")),
    "gen_para.jsonl": jl(gen(paraphrase_id="p9")),
    "gen_occ.jsonl": jl(gen(occupation="nurses")),
    "gen_dup.jsonl": jl(gen(), gen(seed=2), gen()),
    "gen_missing.jsonl": jl({k: v for k, v in gen().items() if k != "seed"}),
    "gen_status.jsonl": jl(gen(status="done")),
    "gen_temp.jsonl": jl(gen(temperature="hot")),
    "gen_seed.jsonl": jl(gen(seed="one")),
    "gen_text.jsonl": jl(gen(output_text=7)),
    "gen_json.jsonl": jl(gen(), "{not json"),
    "gen_empty.jsonl": "\n",
    "gen_array.jsonl": "[1, 2]\n",
    # probe outputs (generative probe-score)
    "probe_context.jsonl": jl(probe_out(), probe_out(context="pro_elenaa")),
    "probe_order.jsonl": jl(probe_out(name_order="XY")),
    "probe_decoding.jsonl": jl(probe_out(decoding="medium")),
    "probe_seed.jsonl": jl(probe_out(seed=9)),
    "probe_dup.jsonl": jl(probe_out(), probe_out()),
    "probe_missing.jsonl": jl({k: v for k, v in probe_out().items() if k != "decoding"}),
    "probe_status.jsonl": jl(probe_out(status="fine")),
    # probe, suite and rubric files
    "probe_bad.json": (REPO / "fairness_tests" / "data" / "probes" / "counterfactual.json")
    .read_text(encoding="utf-8").replace('"\\\\b(top', '"(\\\\b(top', 1),
    "probe_syntax.json": '{"paraphrases": \n',
    "suite_placeholder.yaml": (REPO / "fairness_tests" / "data" / "suites" / "default.yaml")
    .read_text(encoding="utf-8").replace("{OCC} position. Keep", "{OCC} {JOB} position. Keep", 1),
    "suite_syntax.yaml": "name: x\nslices: [\n",
    "rubric_bad.yaml": (REPO / "fairness_tests" / "data" / "rubrics" / "strict.yaml")
    .read_text(encoding="utf-8").replace("\nsemantics: strict", "\nsemantics: loose", 1),
    "grid_bad.csv": "row_id,prompt\n1,hello\n",
    # BBQ predictions (bbq score)
    "pred_json.jsonl": jl(pred(), "{oops"),
    "pred_mixed.jsonl": jl(pred(), pred(example_id=9, answer="b")),
    "pred_index.jsonl": jl(pred(answer=3)),
    "pred_float.jsonl": jl(pred(answer=1.5)),
    "pred_overflow.jsonl": '{"category": "Race_x_SES", "example_id": '
                           + str(10 ** 29) + ', "answer": 1}\n',
    "pred_category.jsonl": jl(pred(category="Race_x_SESS")),
    "pred_noid.jsonl": jl({"category": "Race_x_SES", "answer": 1}),
    "pred_rotation.jsonl": jl(pred(rotation=5)),
    "pred_lmeval_mixed.jsonl": jl(pred(), {"doc": {"category": "Race_x_SES", "example_id": 9},
                                           "filtered_resps": []}),
    "pred_lmeval_bad.jsonl": jl({"doc": {"category": "Race_x_SES", "example_id": 8},
                                 "filtered_resps": "x"}),
    "pred.csv": "category,example_id,answer\nRace_x_SES,8,1\n",
    "pred_empty.jsonl": "",
    "pred_unknown_item.jsonl": jl(pred(example_id=99999999)),
    "pred_good.jsonl": jl(*(pred(example_id=i, answer=i % 3) for i in range(8, 40))),
    # KoBBQ predictions (kobbq score)
    "kobbq_nocol.tsv": "sample_id\tanswer\nage-001a-002-amb-bsd\tx\n",
    "kobbq_dup.jsonl": jl(*[{"sample_id": "age-001a-002-amb-bsd", "prediction": "x"}] * 2),
    "kobbq_json.jsonl": jl({"sample_id": "age-001a-002-amb-bsd", "prediction": "x"}, "{oops"),
    "kobbq_unknown.jsonl": jl({"sample_id": "age-999a-1-amb-bsd", "prediction": "x"}),
    "kobbq_good.jsonl": jl({"sample_id": "age-001a-002-amb-bsd", "prediction": "x"}),
    # cards
    "card_bad.yaml": "model_details: 3\n",
    "card_syntax.yaml": "a: [\n",
    "user_bad.yaml": "intended_use: [\n",
    "user_key.yaml": "intended_usee: x\n",
    # store files
    "store_corrupt.sqlite": "this is not a database" * 50,
    "store_import.jsonl": jl({"key": "x"}),
    "store_import_json.jsonl": "{nope\n",
    # pyproject configurations (--project-dir)
    "proj_nboot/pyproject.toml": "[tool.fairness_tests]\nn_boot = -1\n",
    "proj_unknown/pyproject.toml": "[tool.fairness_tests]\nn_bot = 2000\n",
    "proj_type/pyproject.toml": "[tool.fairness_tests]\nrepeats = \"many\"\n",
    "proj_syntax/pyproject.toml": "[tool.fairness_tests\nn_boot = 1\n",
    "proj_choice/pyproject.toml": "[tool.fairness_tests]\nrotations = \"some\"\n",
    "proj_location/pyproject.toml": "[tool.fairness_tests]\nthresholds = \"nowhere\"\n",
    "proj_seeds/pyproject.toml": "[tool.fairness_tests]\ngen_seeds = [1, 7]\n",
    "a_file.txt": "not a directory\n",
    # issue 32: accepts
    "clf_nomodel/config.json": '{"labels": 2}\n',
    "th_nan.yaml": RULE.format(table="bbq", metric="s_dis", scope="{}").replace(
        "bound: 0.1", "bound: .nan"),
    "th_inf_margin.yaml": RULE.format(table="bbq", metric="s_dis", scope="{}")
    + "    gate: {mode: harm, margin: .inf}\n",
    # issue 32: gate -- other answers to pred_good's items (one template: question_index 1)
    "pred_other.jsonl": jl(*(pred(example_id=i, answer=(i + 1) % 3) for i in range(8, 40))),
}
#: issue 32: UTF-16 files (with a byte order mark) of three input kinds
UTF16 = {"th_utf16.yaml": RULE.format(table="bbq", metric="s_dis", scope="{}"),
         "user_utf16.yaml": "intended_use: {in_scope: x}\n",
         "pred_utf16.jsonl": jl(pred())}


@dataclass(frozen=True)
class Row:
    """One bad input: ``argv`` ({d}: the directory holding :data:`FILES` and the runs),
    the exit code, the words the message must contain (case-insensitive)."""
    id: str
    argv: tuple[str, ...]
    code: int
    words: tuple[str, ...] = ()
    lines: int | None = 1          # lines on stderr (None: not checked)
    stdout_empty: bool = False     # nothing may be printed before the error
    env: dict[str, str] = field(default_factory=dict)


def R(id, argv, code, *words, **kw) -> Row:
    return Row(id, tuple(argv.split()) if isinstance(argv, str) else tuple(argv), code,
               tuple(words), **kw)


AUD = "audit --recordings --store {d}/s.sqlite --out {d}/out"
OFFICIAL = REPO.parent / "shared" / "bbq_official"          # issue 32: outputs
GS = "generative score --n-boot 100 --outputs"
BS = "bbq score --n-boot 100 --predictions"
KS = "kobbq score --n-boot 100"
KOBBQ_DIR = REPO.parent / "shared" / "benchmarks" / "kobbq"
KOBBQ_ENV = {"FAIRNESS_KOBBQ_DIR": str(KOBBQ_DIR)}
#: kobbq score: its predictions files (the authors' TSV layout or JSONL) and options;
#: asked only where the KoBBQ files are (../shared/benchmarks/kobbq)
KOBBQ_ROWS = [
    R("kobbq-missing-column", f"{KS} {{d}}/kobbq_nocol.tsv", 2, "kobbq_nocol.tsv", "line 1",
      "key 'prediction'", "missing column prediction", env=KOBBQ_ENV),
    R("kobbq-duplicate-id", f"{KS} {{d}}/kobbq_dup.jsonl", 2, "kobbq_dup.jsonl", "line 2",
      "key 'sample_id'", "first on line 1", env=KOBBQ_ENV),
    R("kobbq-not-json", f"{KS} {{d}}/kobbq_json.jsonl", 2, "kobbq_json.jsonl", "line 2",
      "not JSON", env=KOBBQ_ENV),
    R("kobbq-unknown-sample", f"{KS} {{d}}/kobbq_unknown.jsonl", 2, "line 1",
      "age-999a-1-amb-bsd", "no KoBBQ test sample", env=KOBBQ_ENV),
    R("kobbq-prompt-id", f"{KS} {{d}}/kobbq_good.jsonl --prompt-id 9", 2, "--prompt-id",
      "<= 5", env=KOBBQ_ENV),
    R("kobbq-prompt-id-0", f"{KS} {{d}}/kobbq_good.jsonl --prompt-id 0", 2, "--prompt-id",
      ">= 1", env=KOBBQ_ENV),
    R("kobbq-cluster", f"{KS} {{d}}/kobbq_good.jsonl --cluster prompt", 2, "--cluster",
      "template, item", env=KOBBQ_ENV),
    R("kobbq-nofile", f"{KS} {{d}}/nowhere.jsonl", 2, "nowhere.jsonl", env=KOBBQ_ENV),
    R("kobbq-data-dir", f"{KS} {{d}}/kobbq_good.jsonl --data-dir {{d}}/nowhere", 2,
      "KoBBQ file not found", "fairness-tests data fetch"),
    R("audit-kobbq-prompt", f"{AUD} --benchmarks kobbq --kobbq-prompt 6", 2, "--kobbq-prompt",
      "<= 5", env=KOBBQ_ENV),
    R("audit-kobbq-prompt-unasked", f"{AUD} --benchmarks bbq --kobbq-prompt 2", 2,
      "--kobbq-prompt", "applies to kobbq", "does not ask", env=KOBBQ_ENV),
]

CLI_ROWS = [
    # --- audit: every numeric option has a range (issue 22 section 2)
    R("repeats-0", f"{AUD} --benchmarks consistency --repeats 0", 2, "--repeats", ">= 1"),
    R("repeats-neg", f"{AUD} --benchmarks consistency --repeats -3", 2, "--repeats", ">= 1"),
    R("n-boot-0", f"{AUD} --n-boot 0", 2, "--n-boot", ">= 100"),
    R("n-boot-neg", f"{AUD} --n-boot -1", 2, "--n-boot", ">= 100"),
    R("n-boot-99", f"{AUD} --n-boot 99", 2, "--n-boot", ">= 100"),
    R("n-boot-word", f"{AUD} --n-boot many", 2, "--n-boot", "integer"),
    R("limit-neg", f"{AUD} --limit -1", 2, "--limit", ">= 0"),
    R("limit-word", f"{AUD} --limit all", 2, "--limit", "integer"),
    R("limit-float", f"{AUD} --limit 1.5", 2, "--limit", "integer"),
    R("workers-0", f"{AUD} --workers 0", 2, "--workers", ">= 1"),
    R("workers-word", f"{AUD} --workers many", 2, "--workers"),
    R("per-cell-0", f"{AUD} --per-cell 0", 2, "--per-cell", ">= 1"),
    R("max-tokens-0", f"{AUD} --max-tokens 0", 2, "--max-tokens", ">= 1"),
    R("batch-size-0", f"{AUD} --batch-size 0", 2, "--batch-size", ">= 1"),
    R("temperature-neg", f"{AUD} --temperature -1", 2, "--temperature", ">= 0"),
    R("temperature-high", f"{AUD} --temperature 2.5", 2, "--temperature", "<= 2"),
    R("temperature-nan", f"{AUD} --temperature nan", 2, "--temperature", "finite"),
    R("temperature-inf", f"{AUD} --temperature inf", 2, "--temperature", "finite"),
    R("seed-neg", f"{AUD} --seed -1", 2, "--seed", ">= 0"),
    R("gen-seeds-0", f"{AUD} --benchmarks generative --gen-seeds 0 -1", 2, "--gen-seeds",
      ">= 1"),
    R("gen-seeds-unrecorded", f"{AUD} --benchmarks generative --gen-seeds 6", 2,
      "--gen-seeds", "6", "not in the protocol", "1, 2, 3, 4, 5"),
    R("gen-seeds-one-bad", f"{AUD} --benchmarks generative --gen-seeds 1 6", 2,
      "--gen-seeds", "6", "not in the protocol"),
    R("gen-seeds-no-generative", f"{AUD} --benchmarks bbq --gen-seeds 1", 2, "--gen-seeds",
      "applies to generative and probe, which this run does not ask (benchmarks: bbq)"),
    R("bbq-option-no-bbq", f"{AUD} --benchmarks generative --bbq-filter none", 2,
      "--bbq-filter", "applies to bbq and consistency, which this run does not ask "
      "(benchmarks: generative)"),
    R("gen-limit-0", f"{AUD} --gen-limit 0", 2, "--gen-limit", ">= 1"),
    R("gen-max-new-tokens-0", f"{AUD} --gen-max-new-tokens 0", 2, "--gen-max-new-tokens",
      ">= 1"),
    R("thinking-budget-0", f"{AUD} --model openai/x --thinking-budget 0", 2,
      "--thinking-budget", ">= 1"),
    R("max-cost-0", f"{AUD} --model openai/x --max-cost 0", 2, "--max-cost", "> 0"),
    R("rpm-neg", f"{AUD} --model openai/x --rpm -5", 2, "--rpm", "> 0"),
    R("tpm-0", f"{AUD} --model openai/x --tpm 0", 2, "--tpm", "> 0"),
    # --- audit: choices, combinations, misleading advice
    R("protocol-typo", f"{AUD} --benchmarks bbqq", 2, "--benchmarks", "did you mean 'bbq'"),
    R("protocol-twice", f"{AUD} --benchmarks bbq bbq", 2, "--benchmarks", "twice"),
    R("backend-typo", f"{AUD} --backend litelm", 2, "--backend", "did you mean 'litellm'"),
    R("model-typo", f"{AUD} --model embedded:gemma-3-207m", 2, "--model",
      "embedded:gemma-3-270m", "unknown embedded model"),
    R("rotations-typo", f"{AUD} --rotations some", 2, "--rotations", "none, sample, all"),
    R("bbq-filter-typo", f"{AUD} --bbq-filter intersection", 2, "--bbq-filter",
      "did you mean 'intersectional'"),
    R("categories-typo", f"{AUD} --categories Race_x_SESS", 2, "--categories",
      "did you mean 'Race_x_SES'"),
    R("consistency-items", f"{AUD} --consistency-items some", 2, "--consistency-items"),
    R("repeat-mode-local", f"{AUD} --repeat-mode n", 2, "--repeat-mode", "litellm"),
    R("reasoning-local", f"{AUD} --reasoning-effort high", 2, "--reasoning-effort",
      "litellm"),
    R("max-cost-local", f"{AUD} --max-cost 5", 2, "--max-cost", "litellm"),
    R("shard-bad", f"{AUD} --model openai/x --live --shard 3/2", 2, "--shard", "I/N"),
    R("shard-replay", f"{AUD} --model openai/x --shard 1/2", 2, "--shard", "--live"),
    R("suite-and-grid", f"{AUD} --suite {{d}}/suite_syntax.yaml --published-grid "
      "{d}/grid_bad.csv", 2, "--published-grid", "not both"),
    R("unknown-flag", f"{AUD} --n-bot 100", 2, "--n-bot", "unrecognized"),
    R("bbq-dir-missing", f"{AUD} --benchmarks bbq --bbq-dir {{d}}/nowhere", 2,
      "BBQ data not found", "fairness-tests data fetch", "FAIRNESS_BBQ_DIR"),
    R("bbq-dir-file", f"{AUD} --benchmarks bbq --bbq-dir {{d}}/a_file.txt", 2,
      "a_file.txt", "fairness-tests data fetch"),
    R("suite-placeholder", f"{AUD} --benchmarks generative --suite {{d}}/suite_placeholder.yaml",
      2, "suite_placeholder.yaml", "{JOB}"),
    R("suite-syntax", f"{AUD} --benchmarks generative --suite {{d}}/suite_syntax.yaml", 2,
      "suite_syntax.yaml", "line"),
    R("suite-missing", f"{AUD} --benchmarks generative --suite {{d}}/nowhere.yaml", 2,
      "nowhere.yaml"),
    R("published-grid-bad", f"{AUD} --benchmarks generative --published-grid {{d}}/grid_bad.csv",
      2, "grid_bad.csv", "line 1", "columns"),
    R("rubric-missing", f"{AUD} --benchmarks generative --rubric {{d}}/nowhere.yaml", 2,
      "nowhere.yaml"),
    R("thresholds-missing", f"{AUD} --thresholds {{d}}/nowhere.yaml", 2, "nowhere.yaml",
      "cannot read thresholds file"),
    # --- thresholds files (audit, before any model is asked)
    R("th-scope", f"{AUD} --thresholds {{d}}/th_scope.yaml", 2, "th_scope.yaml", "line 6",
      "'disambiguated'", "did you mean 'disambig'", "ambig, disambig"),
    R("th-scope-list", f"{AUD} --thresholds {{d}}/th_scope_list.yaml", 2, "'negative'",
      "neg, nonneg"),
    R("th-scope-dataset", f"{AUD} --thresholds {{d}}/th_scope_dataset.yaml", 2,
      "Race_x_Gender", "did you mean 'Race_x_gender'"),
    R("th-scope-column", f"{AUD} --thresholds {{d}}/th_scope_col.yaml", 2, "contxt",
      "did you mean 'context'"),
    R("th-metric", f"{AUD} --thresholds {{d}}/th_metric.yaml", 2, "th_metric.yaml",
      "s_diss", "did you mean 's_dis'"),
    R("th-table", f"{AUD} --thresholds {{d}}/th_table.yaml", 2, "bbqq", "unknown table"),
    R("th-syntax", f"{AUD} --thresholds {{d}}/th_syntax.yaml", 2, "th_syntax.yaml", "YAML"),
    R("th-bound-string", f"{AUD} --thresholds {{d}}/th_bound.yaml", 2, "bound", "number"),
    R("th-unknown-key", f"{AUD} --thresholds {{d}}/th_key.yaml", 2, "rationle",
      "did you mean 'rationale'"),
    R("th-missing-key", f"{AUD} --thresholds {{d}}/th_missing.yaml", 2, "rationale",
      "missing"),
    R("th-op", f"{AUD} --thresholds {{d}}/th_op.yaml", 2, "op", "<<"),
    R("th-alpha", f"{AUD} --thresholds {{d}}/th_alpha.yaml", 2, "alpha", "p_value"),
    R("th-pvalue", f"{AUD} --thresholds {{d}}/th_pvalue.yaml", 2, "p_value", "alpha"),
    R("th-dup-id", f"{AUD} --thresholds {{d}}/th_dup.yaml", 2, "duplicate rule id"),
    R("th-reason-figure", f"{AUD} --thresholds {{d}}/th_reason.yaml", 2, "expected_fail",
      "0.42"),
    R("th-drift", f"{AUD} --thresholds {{d}}/th_drift.yaml", 2, "s_diss", "drift"),
    R("th-dup-key", f"{AUD} --thresholds {{d}}/th_dupkey.yaml", 2, "bound", "duplicate key"),
    R("th-slice-run", f"{GS} {{d}}/gen_good.jsonl --thresholds {{d}}/th_slice.yaml "
      "--out {d}/o_slice", 2,
      "th_slice.yaml", "man_Muslimm", "did you mean 'man_Muslim'", "woman_Christian"),
    # --- the project's [tool.fairness_tests] table
    R("toml-n-boot", "--project-dir {d}/proj_nboot " + AUD, 2, "pyproject.toml", "n_boot",
      ">= 100"),
    R("toml-unknown", "--project-dir {d}/proj_unknown " + AUD, 2, "pyproject.toml", "n_bot",
      "did you mean 'n_boot'"),
    R("toml-type", "--project-dir {d}/proj_type " + AUD, 2, "pyproject.toml", "repeats",
      "integer"),
    R("toml-syntax", "--project-dir {d}/proj_syntax " + AUD, 2, "pyproject.toml"),
    R("toml-choice", "--project-dir {d}/proj_choice " + AUD, 2, "rotations", "some"),
    R("toml-location", "--project-dir {d}/proj_location " + AUD, 2, "pyproject.toml",
      "nowhere"),
    R("toml-gen-seeds", "--project-dir {d}/proj_seeds " + AUD, 2, "pyproject.toml",
      "gen_seeds", "7 not in the protocol"),
    R("project-dir-missing", "--project-dir {d}/nowhere " + AUD, 2, "nowhere",
      "does not exist"),
    # --- generative score: the outputs are checked against the protocol
    R("gen-slice", f"{GS} {{d}}/gen_slice.jsonl", 2, "gen_slice.jsonl", "line 2",
      "slice_religion", "'Muslimm'", "did you mean 'Muslim'"),
    R("gen-gender", f"{GS} {{d}}/gen_gender.jsonl", 2, "line 1", "slice_gender", "'men'",
      "did you mean 'man'"),
    R("gen-family", f"{GS} {{d}}/gen_family.jsonl", 2, "line 2", "prompt_family", "'F9'",
      "F1, F2, F3, F4"),
    R("gen-paraphrase", f"{GS} {{d}}/gen_para.jsonl", 2, "paraphrase_id", "'p9'",
      "p1, p2, p3, p4, p5"),
    R("gen-occupation", f"{GS} {{d}}/gen_occ.jsonl", 2, "occupation", "'nurses'",
      "did you mean 'nurse'"),
    R("gen-duplicate", f"{GS} {{d}}/gen_dup.jsonl", 2, "line 3", "line 1", "same generation"),
    R("gen-missing", f"{GS} {{d}}/gen_missing.jsonl", 2, "line 1", "seed"),
    R("gen-status", f"{GS} {{d}}/gen_status.jsonl", 2, "status", "'done'"),
    R("gen-temperature", f"{GS} {{d}}/gen_temp.jsonl", 2, "temperature", "number"),
    R("gen-seed", f"{GS} {{d}}/gen_seed.jsonl", 2, "seed", "integer"),
    R("gen-text", f"{GS} {{d}}/gen_text.jsonl", 2, "output_text", "string"),
    R("gen-json", f"{GS} {{d}}/gen_json.jsonl", 2, "gen_json.jsonl", "line 2", "JSON"),
    R("gen-empty", f"{GS} {{d}}/gen_empty.jsonl", 2, "gen_empty.jsonl", "no records"),
    R("gen-array", f"{GS} {{d}}/gen_array.jsonl", 2, "line 1", "object"),
    R("gen-nofile", f"{GS} {{d}}/nowhere.jsonl", 2, "nowhere.jsonl"),
    R("gen-cluster", f"{GS} {{d}}/gen_good.jsonl --cluster template", 2, "--cluster",
      "prompt, row"),
    R("gen-rubric", f"{GS} {{d}}/gen_good.jsonl --rubric {{d}}/rubric_bad.yaml", 2,
      "rubric_bad.yaml", "semantics", "loose"),
    R("gen-rubric-name", f"{GS} {{d}}/gen_good.jsonl --rubric strictt", 2, "strictt"),
    R("gen-format", f"{GS} {{d}}/gen_good.jsonl --format csv", 2, "--format", "json, table"),
    R("gen-n-boot", f"{GS} {{d}}/gen_good.jsonl --n-boot -5", 2, "--n-boot", ">= 100"),
    R("gen-suite-missing", f"{GS} {{d}}/gen_good.jsonl --suite {{d}}/nowhere.yaml", 2,
      "nowhere.yaml"),
    R("sensitivity-one-rubric", "generative sensitivity --outputs {d}/gen_good.jsonl "
      "--rubrics published", 2, "--rubrics", "two rubrics"),
    R("sensitivity-slice", "generative sensitivity --outputs {d}/gen_slice.jsonl", 2,
      "line 2", "Muslimm"),
    R("grid-both", "generative grid --protocol {d}/suite_syntax.yaml --published "
      "{d}/grid_bad.csv", 2, "--published", "not both"),
    R("grid-suite", "generative grid --protocol {d}/suite_placeholder.yaml", 2,
      "suite_placeholder.yaml", "{JOB}"),
    R("grid-published", "generative grid --published {d}/grid_bad.csv", 2, "grid_bad.csv",
      "columns"),
    R("probe-grid-bad", "generative probe-grid --probe {d}/probe_bad.json", 2,
      "probe_bad.json", "classifier_regex", "regex"),
    R("probe-grid-syntax", "generative probe-grid --probe {d}/probe_syntax.json", 2,
      "probe_syntax.json", "JSON"),
    # --- probe outputs
    R("probe-context", "generative probe-score --outputs {d}/probe_context.jsonl", 2,
      "line 2", "context", "'pro_elenaa'", "did you mean 'pro_elena'"),
    R("probe-order", "generative probe-score --outputs {d}/probe_order.jsonl", 2,
      "name_order", "PE, EP"),
    R("probe-decoding", "generative probe-score --outputs {d}/probe_decoding.jsonl", 2,
      "decoding", "low_entropy"),
    R("probe-seed", "generative probe-score --outputs {d}/probe_seed.jsonl", 2, "seed",
      "1, 2, 3, 4, 5"),
    R("probe-duplicate", "generative probe-score --outputs {d}/probe_dup.jsonl", 2,
      "line 2", "line 1", "same generation"),
    R("probe-missing", "generative probe-score --outputs {d}/probe_missing.jsonl", 2,
      "line 1", "decoding"),
    R("probe-status", "generative probe-score --outputs {d}/probe_status.jsonl", 2,
      "status", "fine"),
    # --- bbq score: predictions files (JSONL, lm-eval, a CSV by mistake)
    R("pred-json", f"{BS} {{d}}/pred_json.jsonl", 2, "pred_json.jsonl", "line 2", "JSON"),
    R("pred-mixed", f"{BS} {{d}}/pred_mixed.jsonl", 2, "line 2", "one answer format"),
    R("pred-index", f"{BS} {{d}}/pred_index.jsonl", 2, "line 1", "answer", "0..2"),
    R("pred-float", f"{BS} {{d}}/pred_float.jsonl", 2, "line 1", "answer"),
    R("pred-overflow", f"{BS} {{d}}/pred_overflow.jsonl", 2, "line 1", "example_id",
      "integer"),
    R("pred-category", f"{BS} {{d}}/pred_category.jsonl", 2, "Race_x_SESS",
      "did you mean 'Race_x_SES'"),
    R("pred-no-id", f"{BS} {{d}}/pred_noid.jsonl", 2, "line 1", "example_id"),
    R("pred-rotation", f"{BS} {{d}}/pred_rotation.jsonl", 2, "line 1", "rotation"),
    R("pred-lmeval-mixed", f"{BS} {{d}}/pred_lmeval_mixed.jsonl", 2, "line 2", "lm-eval",
      "one format per file"),
    R("pred-lmeval-bad", f"{BS} {{d}}/pred_lmeval_bad.jsonl", 2, "line 1",
      "filtered_resps"),
    R("pred-csv", f"{BS} {{d}}/pred.csv", 2, "pred.csv", "line 1", "JSON"),
    R("pred-empty", f"{BS} {{d}}/pred_empty.jsonl", 2, "pred_empty.jsonl"),
    R("pred-unknown-item", f"{BS} {{d}}/pred_unknown_item.jsonl", 2, "99999999"),
    R("pred-nofile", f"{BS} {{d}}/nowhere.jsonl", 2, "nowhere.jsonl"),
    R("bbq-score-concentration", f"{BS} {{d}}/pred_good.jsonl --concentration -1", 2,
      "--concentration", "> 0"),
    R("bbq-score-concentration-0", f"{BS} {{d}}/pred_good.jsonl --concentration 0", 2,
      "--concentration", "> 0"),
    R("bbq-score-min-group-n", f"{BS} {{d}}/pred_good.jsonl --min-group-n -3", 2,
      "--min-group-n", ">= 1"),
    R("bbq-score-n-boot", f"{BS} {{d}}/pred_good.jsonl --n-boot -5", 2, "--n-boot",
      ">= 100"),
    R("bbq-score-cluster", f"{BS} {{d}}/pred_good.jsonl --cluster prompt", 2, "--cluster",
      "template, item"),
    R("bbq-score-conventions", f"{BS} {{d}}/pred_good.jsonl --conventions authors", 2,
      "--conventions", "bbq-authors"),
    R("bbq-score-data", f"{BS} {{d}}/pred_good.jsonl --data {{d}}/nowhere", 2,
      "BBQ data not found", "fairness-tests data fetch"),
    R("bbq-score-th-scope", f"{BS} {{d}}/pred_good.jsonl --thresholds {{d}}/th_scope.yaml "
      "--out {d}/o_scope", 2,
      "th_scope.yaml", "disambiguated"),
    R("bbq-filter-filter", "bbq filter --filter both", 2, "--filter", "intersectional"),
    R("bbq-filter-data", "bbq filter --data {d}/nowhere", 2, "BBQ data not found"),
    R("bbq-filter-format", "bbq filter --format xml", 2, "--format", "table, json"),
    # --- gate (runs made by the fixture)
    R("gate-cluster-bbq", "gate {d}/bbq_run {d}/bbq_run --cluster prompt", 2, "--cluster",
      "prompt", "generative", stdout_empty=True),
    R("gate-cluster-two", "gate {d}/bbq_run {d}/bbq_run --cluster template item", 2,
      "--cluster", "two resampling units for bbq"),
    R("gate-bbq-vs-generative", "gate {d}/bbq_run {d}/gen_run", 2, "nothing to gate",
      "bbq", "generative", stdout_empty=True),
    R("gate-itself", "gate {d}/bbq_run {d}/bbq_run", 2, "baseline", stdout_empty=True),
    R("gate-missing", "gate {d}/nowhere {d}/bbq_run", 2, "nowhere"),
    R("gate-alpha", "gate {d}/bbq_run {d}/gen_run --alpha 1", 2, "--alpha", "< 1"),
    R("gate-alpha-0", "gate {d}/bbq_run {d}/gen_run --alpha 0", 2, "--alpha", "> 0"),
    R("gate-mode", "gate {d}/bbq_run {d}/gen_run --mode harmful", 2, "--mode", "harm"),
    R("gate-n-boot", "gate {d}/bbq_run {d}/gen_run --n-boot 10", 2, "--n-boot", ">= 100"),
    R("gate-one-run", "gate {d}/bbq_run", 2, "CANDIDATE_RUN"),
    # --- cards
    R("card-no-run", "card --out {d}/card", 2, "--run", "must be given"),
    R("card-run-missing", "card --run {d}/nowhere --out {d}/card", 2, "nowhere"),
    R("card-user-yaml", "card --run {d}/gen_run --out {d}/card_u --user-yaml "
      "{d}/user_bad.yaml", 2, "user_bad.yaml"),
    R("card-user-key", "card --run {d}/gen_run --out {d}/card_k --user-yaml "
      "{d}/user_key.yaml", 2, "user_key.yaml", "intended_usee"),
    R("card-validate-syntax", "card validate {d}/card_syntax.yaml", 2, "card_syntax.yaml"),
    R("card-validate-missing", "card validate {d}/nowhere.yaml", 2, "nowhere.yaml"),
    R("card-render-syntax", "card render {d}/card_syntax.yaml --out {d}/r", 2,
      "card_syntax.yaml"),
    R("card-diff-missing", "card diff {d}/nowhere.yaml {d}/card_syntax.yaml", 2,
      "nowhere.yaml"),
    R("card-diff-format", "card diff {d}/a.yaml {d}/b.yaml --format html", 2, "--format",
      "terminal, markdown"),
    # --- compare
    R("compare-one", "compare {d}/bbq_run --out {d}/cmp", 2, "two or more"),
    R("compare-names", "compare {d}/bbq_run {d}/gen_run --out {d}/cmp --names a", 2,
      "--names", "1 name"),
    R("compare-missing", "compare {d}/bbq_run {d}/nowhere --out {d}/cmp", 2, "nowhere"),
    R("compare-n-boot", "compare {d}/bbq_run {d}/gen_run --out {d}/cmp --n-boot 0", 2,
      "--n-boot", ">= 100"),
    # --- store
    R("store-corrupt", "store stats --store {d}/store_corrupt.sqlite", 2,
      "store_corrupt.sqlite"),
    R("store-directory", "store stats --store {d}", 2, "store"),
    R("store-import-bad", "store import {d}/store_import.jsonl --store {d}/imp.sqlite", 2,
      "store_import.jsonl", "line 1"),
    R("store-import-json", "store import {d}/store_import_json.jsonl --store {d}/imp.sqlite",
      2, "store_import_json.jsonl", "line 1"),
    R("store-import-missing", "store import {d}/nowhere.jsonl --store {d}/imp.sqlite", 2,
      "nowhere.jsonl"),
    R("store-prune-age", "store prune --older-than 7x --store {d}/imp.sqlite", 2,
      "--older-than", "7x"),
    R("store-prune-status", "store prune --status fine --store {d}/imp.sqlite", 2,
      "--status"),
    R("store-merge-missing", "store merge {d}/nowhere.sqlite --into {d}/m.sqlite", 2,
      "nowhere.sqlite"),
    R("store-format", "store stats --format xml --store {d}/imp.sqlite", 2, "--format"),
    # --- init, data
    R("init-model-typo", "init --dir {d}/init --model embedded:gemma-3-207m", 2, "--model",
      "embedded:gemma-3-270m"),
    R("init-dir-file", "init --dir {d}/a_file.txt", 2, "a_file.txt"),
    R("data-fetch-category", "data fetch --categories Agee --dest {d}/bbqf", 2,
      "--categories", "did you mean 'Age'"),
    R("data-fetch-timeout", "data fetch --timeout 0 --dest {d}/bbqf", 2, "--timeout", "> 0"),
    R("data-fetch-from", "data fetch --from {d}/nowhere --dest {d}/bbqf", 2, "nowhere"),
    R("data-fetch-benchmark", "data fetch --benchmark winobiass --dest {d}/wbf", 2,
      "--benchmark", "must be one of", "did you mean 'winobias'"),
    R("data-fetch-benchmark-no-source", "data fetch --benchmark probe --dest {d}/wbf", 2,
      "--benchmark", "must be one of", "winogender"),
    R("data-fetch-benchmark-categories", "data fetch --benchmark winobias --categories Age "
      "--dest {d}/wbf", 2, "--categories", "an option of bbq's fetch", "drop it"),
    R("data-fetch-benchmark-from", "data fetch --benchmark winogender --from {d}/nowhere "
      "--dest {d}/wgf", 2, "nowhere", "--from", "no such directory"),
    R("data-fetch-benchmark-offline", "data fetch --benchmark winogender --base-url "
      "http://127.0.0.1:9/wg --timeout 5 --dest {d}/wg-offline", 2, "download failed",
      "http://127.0.0.1:9/wg/data/all_sentences.tsv", "--from DIR"),
    # --- usage
    R("no-command", "", 2, "required"),
    R("unknown-command", "audits", 2, "invalid choice"),
    R("missing-value", "audit --n-boot", 2, "--n-boot", "expected one argument"),
    # --- issue 32: accepts
    R("classifier-not-a-model", f"{GS} {{d}}/gen_good.jsonl --scorers published,classifier "
      "--classifier {d}/clf_nomodel --classifier-labels toxic=demeaning --no-rules", 2,
      "--classifier", "clf_nomodel", "model_type", "save_pretrained",
      env={"HF_HUB_OFFLINE": "1"}),
    R("classifier-no-config", f"{GS} {{d}}/gen_good.jsonl --scorers published,classifier "
      "--classifier {d}/proj_nboot --classifier-labels toxic=demeaning --no-rules", 2,
      "--classifier", "no config.json"),
    R("th-utf16", f"{AUD} --thresholds {{d}}/th_utf16.yaml", 2, "th_utf16.yaml", "UTF-16",
      "must be UTF-8"),
    R("user-yaml-utf16", "card --run {d}/gen_run --out {d}/card_16 --user-yaml "
      "{d}/user_utf16.yaml", 2, "--user-yaml", "user_utf16.yaml", "must be UTF-8"),
    R("pred-utf16", f"{BS} {{d}}/pred_utf16.jsonl", 2, "pred_utf16.jsonl", "UTF-16",
      "must be UTF-8"),
    R("th-nan", f"{AUD} --thresholds {{d}}/th_nan.yaml", 2, "th_nan.yaml", "line 8",
      "rules[0].bound", "finite", "nan"),
    R("th-inf-margin", f"{AUD} --thresholds {{d}}/th_inf_margin.yaml", 2,
      "th_inf_margin.yaml", "line 10", "rules[0].gate.margin", "finite", "inf"),
    R("answer-prefix-chat", "audit --dry-run --store {d}/s.sqlite --model openai/gpt-4o-mini "
      "--prompt-format chat --answer-prefix Réponse:(", 2, "--answer-prefix", "unused",
      "'chat'", "chat-prefill"),
    R("audit-user-yaml-first", f"{AUD} --benchmarks consistency --user-yaml "
      "{d}/user_key.yaml", 2, "--user-yaml", "user_key.yaml", "intended_usee",
      stdout_empty=True),
    # --- issue 32: newcomer
    R("data-fetch-offline", "data fetch --base-url http://127.0.0.1:9/bbq --timeout 5 "
      "--dest {d}/bbq-offline", 2, "Race_x_SES.jsonl", "download failed",
      "http://127.0.0.1:9/bbq/data/Race_x_SES.jsonl", "--from DIR"),
    R("bbq-filter-dir-missing", "bbq filter --bbq-dir {d}/no-bbq", 2, "BBQ data not found",
      "--dest .fairness/bbq", "--bbq-dir or FAIRNESS_BBQ_DIR", "--from DIR"),
    # --- issue 32: outputs
    R("fetch-dest-file", f"data fetch --from {OFFICIAL} --categories Age --dest "
      "{d}/a_file.txt", 2, "--dest", "a_file.txt", "is a file, not a folder"),
    R("fetch-dest-under-file", f"data fetch --from {OFFICIAL} --categories Age --dest "
      "{d}/a_file.txt/bbq", 2, "--dest", "a_file.txt is a file", "cannot hold it"),
    R("prepare-cache-file", "model prepare --cache {d}/a_file.txt", 2, "--cache",
      "a_file.txt", "is a file, not a folder"),
    R("out-under-file", f"{BS} {{d}}/pred_good.jsonl --out {{d}}/a_file.txt/run", 2,
      "--out", "a_file.txt is a file"),
    R("gate-out-baseline", "gate {d}/bbq_run {d}/gen_run --out {d}/bbq_run", 2,
      "--out", "BASELINE_RUN", "an input of this command", stdout_empty=True),
    R("gate-out-in-candidate", "gate {d}/bbq_run {d}/gen_run --out {d}/gen_run/gate", 2,
      "--out", "is inside CANDIDATE_RUN", stdout_empty=True),
    R("card-out-run", "card --run {d}/bbq_run --out {d}/bbq_run", 2, "--out", "--run",
      "an input of this command"),
    R("compare-out-holds", "compare {d}/bbq_run {d}/gen_run --out {d}", 2, "--out", "holds",
      "RUN_DIR"),
    R("score-out-predictions", f"{BS} {{d}}/pred_good.jsonl --out {{d}}/pred_good.jsonl", 2,
      "--out", "--predictions", "an input of this command"),
    R("audit-export-in-out", f"{AUD}_nest --export {{d}}/out_nest/x.jsonl", 2, "--out",
      "--export", "another output of this command"),
    R("audit-export-store", "audit --recordings --store {d}/s2.sqlite --export "
      "{d}/s2.sqlite --out {d}/out2", 2, "--export", "--store"),
    R("store-export-over-store", "store export {d}/store_corrupt.sqlite --store "
      "{d}/store_corrupt.sqlite", 2, "PATH", "--store", "an input of this command"),
    R("store-import-into-itself", "store import {d}/store_import.jsonl --store "
      "{d}/store_import.jsonl", 2, "--store", "PATH", "an input of this command"),
    R("fetch-dest-is-from", "data fetch --from {d}/proj_seeds --dest {d}/proj_seeds", 2,
      "--dest", "--from", "an input of this command"),
    # --- issue 32: gate
    R("gate-run-no-tables", "gate {d}/bbq_run {d}/bbq_run_notables", 2, "bbq_run_notables",
      "missing tables/", stdout_empty=True),
    R("card-run-no-tables", "card --run {d}/bbq_run_notables --out {d}/card_nt", 2,
      "bbq_run_notables", "missing tables/", stdout_empty=True),
    R("compare-run-no-tables", "compare {d}/bbq_run {d}/bbq_run_notables --out {d}/cmp_nt", 2,
      "bbq_run_notables", "missing tables/", stdout_empty=True),
    R("gate-nothing-compared", "gate {d}/bbq_run {d}/bbq_run_other --n-boot 100", 5,
      "nothing compared", "1 cluster (question_index)"),
    *(KOBBQ_ROWS if (KOBBQ_DIR / "KoBBQ_test_samples.tsv").is_file() else []),
]

#: pytest options and ini keys: (id, options, ini lines, words); usage errors exit 4
PYTEST_ROWS = [
    ("backend-typo", ["--fairness-backend", "litelm"], "", ("--fairness-backend",
                                                             "did you mean 'litellm'")),
    ("n-boot", ["--fairness-n-boot", "-1"], "", ("--fairness-n-boot", ">= 100")),
    ("repeats", ["--fairness-repeats", "0"], "", ("--fairness-repeats", ">= 1")),
    ("model-typo", ["--fairness-model", "embedded:gemma-3-207m"], "",
     ("--fairness-model", "embedded:gemma-3-270m")),
    ("protocol-typo", ["--fairness-benchmarks", "bbqq"], "", ("--fairness-benchmarks",
                                                             "did you mean 'bbq'")),
    ("temperature", ["--fairness-temperature", "-1"], "", ("--fairness-temperature",
                                                            ">= 0")),
    ("ini-n-boot", [], "fairness_n_boot = 5", ("ini fairness_n_boot", ">= 100")),
    ("gen-seeds", ["--fairness-gen-seeds", "6"], "", ("--fairness-gen-seeds",
                                                      "not in the protocol")),
    ("thresholds", ["--fairness-thresholds", "th_scope.yaml"], "",
     ("th_scope.yaml", "disambiguated")),
]


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def d(tmp_path_factory) -> Path:
    """The directory holding every input file, a BBQ run and a generative run."""
    root = tmp_path_factory.mktemp("bad_inputs")
    for name, text in FILES.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    for name, text in UTF16.items():
        (root / name).write_bytes(text.encode("utf-16"))
    for args in (["generative", "score", "--outputs", str(root / "gen_good.jsonl"),
                  "--n-boot", "100", "--out", str(root / "gen_run"), "--model", "m-gen"],
                 ["bbq", "score", "--predictions", str(root / "pred_good.jsonl"),
                  "--n-boot", "100", "--out", str(root / "bbq_run"), "--model", "m-bbq"],
                 # issue 32: gate
                 ["bbq", "score", "--predictions", str(root / "pred_other.jsonl"),
                  "--n-boot", "100", "--out", str(root / "bbq_run_other"), "--model",
                  "m-bbq-other"]):
        assert main(args) in (0, 1, 5)      # 5: runs this small are below every min_n
    # issue 32: gate -- a copy of the BBQ run that lost its tables/ folder
    shutil.copytree(root / "bbq_run", root / "bbq_run_notables")
    shutil.rmtree(root / "bbq_run_notables" / "tables")
    return root


@pytest.fixture(scope="module")
def pytest_results(d):
    """Every pytest row, run as a subprocess in its own directory, all at once."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "FAIRNESS_PROGRESS": "off"}
    env.pop("PYTEST_ADDOPTS", None)
    procs = {}
    for rid, opts, ini, _ in PYTEST_ROWS:
        where = d / f"pt_{rid}"
        where.mkdir()
        (where / "test_one.py").write_text("def test_one():\n    assert True\n")
        (where / "pytest.ini").write_text(f"[pytest]\n{ini}\n")
        opts = [str(d / o) if o.endswith(".yaml") else o for o in opts]
        procs[rid] = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             "-p", "no:randomly", *opts], cwd=where, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
    outs = finish(procs.values(), 240)     # communicate(): a full pipe never blocks them
    return {rid: (p.returncode, *o) for (rid, p), o in zip(procs.items(), outs, strict=True)}


# ----------------------------------------------------------------------------- tests

def _argv(row: Row, d: Path) -> list[str]:
    return [a.replace("{d}", str(d)) for a in row.argv]


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as exc:          # argparse: usage errors
        rc = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    return rc, out, err


#: a progress line of the audit's stages (``fairness-tests [  0.1s] ...``), printed
#: before the error was met
STAGE_LINE = re.compile(r"^fairness-tests \[ *[0-9.]+s\] ")


def check(rc: int, out: str, err: str, code: int, words, lines: int | None = 1) -> None:
    text = err + out
    assert "Traceback" not in text, text
    assert rc == code, f"exit {rc}, expected {code}: {err}"
    if code == 2 and lines is not None:        # the audit's stage lines are progress, not the error
        said = [x for x in err.strip().splitlines() if not STAGE_LINE.match(x)]
        assert len(said) == lines, err
    low = err.lower()
    for w in words:
        assert w.lower() in low, f"{w!r} not in: {err}"


@pytest.mark.parametrize("row", CLI_ROWS, ids=[r.id for r in CLI_ROWS])
def test_command_line(row: Row, d: Path, capsys, monkeypatch):
    monkeypatch.setenv("FAIRNESS_PROGRESS", "off")
    monkeypatch.setenv("FAIRNESS_BBQ_DIR", str(BBQ_DIR))
    for k, v in row.env.items():
        monkeypatch.setenv(k, v)
    rc, out, err = run_cli(_argv(row, d), capsys)
    check(rc, out, err, row.code, row.words, row.lines)
    if row.stdout_empty:
        assert out == "", f"printed before the error: {out}"


@pytest.mark.parametrize("rid, opts, ini, words", PYTEST_ROWS,
                         ids=[r[0] for r in PYTEST_ROWS])
def test_pytest_options(rid, opts, ini, words, pytest_results):
    rc, out, err = pytest_results[rid]
    text = out + err
    assert "Traceback" not in text, text
    assert rc == 4, f"exit {rc}: {text}"
    errors = [x for x in text.splitlines() if x.startswith("ERROR:")]
    assert len(errors) == 1, text
    for w in words:
        assert w.lower() in errors[0].lower(), f"{w!r} not in: {errors[0]}"


# ----------------------------------------------------------------------------- Python API

def _api_rows():
    return [
        ("n_boot", AuditConfig, {"n_boot": -1}, ("n_boot=", ">= 100")),
        ("repeats", AuditConfig, {"repeats": 0}, ("repeats=", ">= 1")),
        ("limit", AuditConfig, {"limit": -1}, ("limit=", ">= 0")),
        ("workers", AuditConfig, {"workers": 0}, ("workers=", ">= 1")),
        ("model", AuditConfig, {"model": "embedded:gemma-3-207m"},
         ("model=", "embedded:gemma-3-270m")),
        ("gen_seeds", AuditConfig, {"gen_seeds": (0,)}, ("gen_seeds=", ">= 1")),
        ("backend", AuditConfig, {"backend": "litelm"}, ("backend=", "litellm")),
        ("concentration", BBQScoreConfig, {"concentration": 0.0, "predictions": "p"},
         ("concentration=", "> 0")),
        ("min_group_n", BBQScoreConfig, {"min_group_n": 0, "predictions": "p"},
         ("min_group_n=", ">= 1")),
        ("gate_cluster", GateConfig, {"cluster": ("template", "item"), "baseline": "a",
                                      "candidate": "b"},
         ("cluster=", "two resampling units for bbq")),
    ]


@pytest.mark.parametrize("i", range(10))
def test_python_api(i):
    name, cls, kw, words = _api_rows()[i]
    with pytest.raises(FairnessTestsError) as info:
        cls(**kw)
    msg = str(info.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, msg


def test_an_unrecorded_seed_is_an_error_in_python_too(tmp_path):
    with pytest.raises(FairnessTestsError, match="gen_seeds=: seed.s. 6 not in the protocol"):
        run_audit(audit_config(benchmarks=["generative"], gen_seeds=[6], recordings=[],
                               store=str(tmp_path / "s.sqlite")))


def test_the_table_is_large_enough():
    """Issue 22: at least 100 bad inputs across the command line, pytest and the files."""
    assert len(CLI_ROWS) + len(PYTEST_ROWS) + len(_api_rows()) >= 110
    assert len({r.id for r in CLI_ROWS}) == len(CLI_ROWS)


# ----------------------------------------------------------------------------- issue 32

#: Every case issue 32 lists, and where it is tested: a row of this table (``row:ID``) or
#: a test of another module (``tests/MODULE.py::TEST``) where a case needs more than a
#: command and its files (runs of 1, 2 and 30 templates, a link, an immutable folder, a
#: server answering 401, an inner pytest session, a whole card).
ISSUE_32_CASES = {
    "gate green having compared nothing (1 template, both modes)":
        "tests/test_gate.py::test_one_template_compares_nothing_exit_5",
    "gate with 2 templates: evaluable, non-inferiority cannot be shown":
        "tests/test_gate.py::test_two_templates_are_evaluable_and_cannot_show_non_inferiority",
    "gate with 30 templates":
        "tests/test_gate.py::test_thirty_templates_fail_a_wrong_candidate_and_judge_a_same_one",
    "gate: a non-inferiority cell that cannot be evaluated fails":
        "tests/test_gate.py::test_non_inferiority_cells_not_evaluable_fail_among_evaluable_ones",
    "gate nothing compared, from the command line": "row:gate-nothing-compared",
    "gate header 'candidate None vs baseline None'":
        "tests/test_gate.py::test_the_header_names_the_runs",
    "pytest gate never green on nothing":
        "tests/test_plugin.py::test_a_gate_that_compared_nothing_is_never_green",
    "gate --out over its baseline run": "row:gate-out-baseline",
    "gate --out over its baseline run keeps the run":
        "tests/test_outputs.py::test_gate_out_the_baseline_run_keeps_it",
    "no output is, holds or sits inside an input (every command)":
        "tests/test_outputs.py::test_no_output_is_holds_or_sits_inside_an_input",
    "--out in a folder the user cannot write (chattr +i)":
        "tests/test_outputs.py::test_an_output_in_a_folder_no_one_can_write_is_refused_first",
    "generative score --classifier notamodel": "row:classifier-not-a-model",
    "data fetch --dest an existing file": "row:fetch-dest-file",
    "model prepare --cache an existing file": "row:prepare-cache-file",
    "thresholds file in UTF-16 with a BOM": "row:th-utf16",
    "gate with a run directory lacking tables/": "row:gate-run-no-tables",
    "judge without credentials (generative score)":
        "tests/test_judge_cli.py::test_failed_judge_requests_make_the_run_incomplete",
    "judge without credentials (audit)":
        "tests/test_judge_cli.py::test_failed_judge_requests_make_the_audit_incomplete",
    "--answer-prefix silently unused in the chat route": "row:answer-prefix-chat",
    "bound: .nan": "row:th-nan",
    "init --model 'my model/../x'":
        "tests/test_init.py::test_a_model_id_maps_to_one_safe_file_name_init_and_the_loaders_agree",
    "MFAA/GTC counted invalid answers":
        "tests/test_bbq_metrics.py::test_all_invalid_answers_leave_consistency_not_evaluable",
    "expected consistency over valid answers":
        "tests/test_expected_consistency.py::test_expected_consistency_by_hand_over_valid_answers",
    "a failed request counted as an invalid answer":
        "tests/test_bbq_metrics.py::test_failed_requests_are_in_no_metric",
    "'the token budget went to reasoning' for a model that does no reasoning":
        "tests/test_truncation_cause.py::test_logprobs_mode_non_reasoning_model_is_not_blamed_on_reasoning",
    "one minimum size for every rule and cell":
        "tests/test_rules_evaluate.py::test_a_rule_without_min_n_obeys_the_one_default_minimum",
    "a missing additional_metadata.csv not said on the console":
        "tests/test_bbq_cli.py::test_a_derived_target_is_said_on_the_console_card_and_pytest_summary",
    "a bad --user-yaml refused only after the audit": "row:audit-user-yaml-first",
    "the newcomer's path, init to a passing pytest from a local copy":
        "tests/test_init.py::test_pytest_in_an_initialised_empty_directory_replays_and_passes",
    "init says how to get the data before pytest":
        "tests/test_newcomer.py::test_init_says_how_to_get_the_bbq_data_before_pytest",
    "the missing-data message names its context's options":
        "tests/test_newcomer.py::test_missing_bbq_data_names_the_options_of_its_context",
    "an offline data fetch names --from and leaves nothing":
        "tests/test_newcomer.py::test_an_offline_fetch_says_so_names_from_and_leaves_nothing",
    "data fetch --dest /abs/path prints a relative path":
        "tests/test_newcomer.py::test_a_fetch_moves_its_files_in_whole_and_prints_an_absolute_export_line",
    "--help shows reStructuredText markup":
        "tests/test_newcomer.py::test_every_commands_help_is_plain_text",
    "the --out refusal of a symlink says 'not a directory'":
        "tests/test_outputs.py::test_out_a_symbolic_link_says_what_it_is",
    "the batch connection error does not name the URL":
        "tests/test_newcomer.py::test_a_batch_connection_error_names_the_url_without_its_token",
    "official release or not, on every path":
        "tests/test_bbq_release.py::test_one_changed_byte_is_not_the_official_release_and_the_card_says_so",
    "the committed card says its BBQ files are not the official release":
        "tests/test_bbq_release.py::test_the_main_jobs_card_says_the_stand_in_is_not_the_official_release",
    "the test command can hang":
        "tests/test_timeouts.py::test_a_test_waiting_for_ever_fails_naming_itself_and_its_wait",
}


def _test_functions(module: Path) -> set[str]:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)
            and n.name.startswith("test_")}


def test_every_case_of_issue_32_is_tested():
    rows = {r.id for r in CLI_ROWS}
    missing = []
    for case, where in ISSUE_32_CASES.items():
        if where.startswith("row:"):
            if where[4:] not in rows:
                missing.append(f"{case}: no row {where[4:]}")
            continue
        path, name = where.split("::")
        if name not in _test_functions(REPO / path):
            missing.append(f"{case}: no {where}")
    assert not missing, missing
