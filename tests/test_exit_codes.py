"""The exit-code contract (:class:`fairness_tests.core.exits.ExitCode`), each code from a
real run of the command (the shipped recordings, the shared BBQ data, the loopback
OpenAI-compatible server), and pytest's usage errors.

``python -m fairness_tests`` is ``sys.exit(main())``: every code is made by
:func:`fairness_tests.cli.main.main`, so the commands run in-process (``cli``: its
return value, stdout and stderr at the file-descriptor level); a subprocess only where
the property is about a process: Ctrl-C (a real SIGINT) and pytest's own exit code
(its usage errors, under xdist too; those sessions start together).

0 every evaluated rule holds (and one was evaluated); 1 a rule fails; 2 bad usage, one
line; 3 replay misses responses; 4 budget; 5 nothing evaluated; 6 requests ended in
errors; 70 an unexpected fault, one line and a log; 130 Ctrl-C, one line, outputs whole.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import finish, kill_after, run_cli

from fairness_tests.benchmarks.bbq.data import bbq_dir, load_bbq
from fairness_tests.cli.main import main
from fairness_tests.core.exits import ExitCode, worst

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fault_server import FaultServer, tiktoken_counter  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = bbq_dir()
needs_bbq = pytest.mark.skipif(not (SHARED / "Race_x_SES.jsonl").exists(),
                               reason="../shared/bbq not present")


def env(**extra: str) -> dict[str, str]:
    e = dict(os.environ, PYTHONPATH=str(ROOT), LITELLM_LOCAL_MODEL_COST_MAP="True",
             HF_HUB_OFFLINE="1", FAIRNESS_PROGRESS="off")
    e.update(extra)
    return e


@pytest.fixture
def cli(monkeypatch, capfd):
    """``cli(*args)``: ``fairness-tests ARGS`` in this process, as ``python -m
    fairness_tests`` runs it (its environment, the checkout as working directory): a
    :class:`subprocess.CompletedProcess` of its exit code and what it printed on the
    file descriptors (so a traceback printed by anything would be seen)."""
    for k, v in env().items():
        if k != "PYTHONPATH":
            monkeypatch.setenv(k, v)
    monkeypatch.chdir(ROOT)

    return lambda *args: run_cli(capfd, *args)


def no_traceback(p: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr


@pytest.fixture(scope="module")
def predictions(tmp_path_factory) -> dict[str, Path]:
    """Race_x_SES predictions from the BBQ items themselves: ``perfect`` answers every
    item's label; ``stereotyped`` answers the stereotyped person (``target_loc``)
    wherever the item has one, so it is biased in both contexts."""
    items = load_bbq(SHARED, ("Race_x_SES",)).items
    d = tmp_path_factory.mktemp("preds")
    out = {}
    for name in ("perfect", "stereotyped"):
        with open(d / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for x in items.itertuples():
                a = int(x.label)
                if name == "stereotyped" and not math.isnan(x.target_loc):
                    a = int(x.target_loc)
                f.write(json.dumps({"category": x.dataset, "example_id": int(x.example_id),
                                    "answer": a}) + "\n")
        out[name] = d / f"{name}.jsonl"
    return out


def test_precedence_table():
    """The documented order: usage, missing, budget, incomplete, rule failed, nothing."""
    assert worst() == ExitCode.OK
    assert worst(ExitCode.RULE_FAILED, ExitCode.INCOMPLETE) == ExitCode.INCOMPLETE
    assert worst(ExitCode.NOTHING_EVALUATED, ExitCode.RULE_FAILED) == ExitCode.RULE_FAILED
    assert worst(ExitCode.OK, ExitCode.NOTHING_EVALUATED) == ExitCode.NOTHING_EVALUATED


# ----------------------------------------------------------------------------- 0 and 1

@needs_bbq
def test_bbq_score_judges_perfect_0_stereotyped_1(predictions, cli):
    """Defect (issue 22, "commands that never judge"): bbq score printed metrics and
    exited 0 whatever its verdicts said. Now a perfect model exits 0 under the default
    rules (DF included: no disparity, whatever the group sizes) and a stereotyped one 1,
    with the audit's verdict summary; --no-rules prints the metrics only, exit 0."""
    good = cli("bbq", "score", "--predictions", str(predictions["perfect"]), "--n-boot", "100",
              "--format", "table")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "df_bound" in good.stdout and "xfail:" in good.stdout
    bad = cli("bbq", "score", "--predictions", str(predictions["stereotyped"]), "--n-boot",
             "100", "--format", "table")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    fails = {line.split()[0]: int(line.split()[2]) for line in bad.stdout.splitlines()
             if line.startswith(("sdis_bound", "samb_bound"))}
    assert fails == {"sdis_bound": 1, "samb_bound": 1}
    metrics_only = cli("bbq", "score", "--predictions", str(predictions["stereotyped"]),
                      "--n-boot", "100", "--format", "table", "--no-rules")
    assert metrics_only.returncode == 0 and "sdis_bound" not in metrics_only.stdout
    js = cli("bbq", "score", "--predictions", str(predictions["stereotyped"]), "--n-boot", "100",
            "--format", "json")
    assert js.returncode == 1
    doc = json.loads(js.stdout)
    assert doc["verdicts"]["exit_code"] == 1 and doc["verdicts"]["status"]["fail"] >= 2


def test_generative_score_judges(tmp_path, cli):
    """Defect: generative score exited 0 with failing verdicts. The packaged suite's
    grid (seed 1), answered by hand: the man/Muslim slice refuses every request, the
    others answer: the refusal gap fails (exit 1); --no-rules: metrics only, exit 0."""
    grid = cli("generative", "grid", "--format", "json")
    assert grid.returncode == 0, grid.stderr
    fields = ("prompt_family", "paraphrase_id", "occupation", "slice_gender",
              "slice_religion", "temperature", "top_p", "seed")
    rows = []
    for g in json.loads(grid.stdout):
        if g["seed"] != 1:
            continue
        refuse = (g["slice_gender"], g["slice_religion"]) == ("man", "Muslim")
        rows.append({**{k: g[k] for k in fields}, "status": "ok", "output_text":
                     "I'm sorry, I can't help with that." if refuse else
                     "A careful, experienced candidate with a strong record."})
    p = tmp_path / "outputs.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    r = cli("generative", "score", "--outputs", str(p), "--n-boot", "100", "--format", "table")
    no_traceback(r)
    assert r.returncode == 1, r.stdout + r.stderr
    failing = [x.split()[0] for x in r.stdout.splitlines()
               if x.startswith("refusal_gap") and int(x.split()[2]) > 0]
    assert failing, r.stdout
    assert cli("generative", "score", "--outputs", str(p), "--n-boot", "100",
              "--no-rules").returncode == 0


# ----------------------------------------------------------------------------- 2 and 3

def test_usage_error_is_one_line_exit_2(cli):
    r = cli("bbq", "score", "--predictions", "nonexistent.jsonl", "--n-boot", "5")
    assert r.returncode == 2
    no_traceback(r)
    assert len(r.stderr.strip().splitlines()) == 1 and "--n-boot" in r.stderr


def test_replay_miss_exit_3(tmp_path, cli):
    """Nothing recorded (no recordings imported into a new store): replay misses."""
    r = cli("audit", "--benchmarks", "bbq", "--limit", "1", "--rotations", "none", "-q",
           "--recordings", "--store", str(tmp_path / "s.sqlite"), "--out",
           str(tmp_path / "o"), "--n-boot", "100")
    assert r.returncode == 3, r.stdout + r.stderr
    no_traceback(r)
    assert "--live" in r.stderr
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------------------------- 4, 5, 6

def _live(cli, server, tmp_path, *extra: str, out: str = "o") -> subprocess.CompletedProcess:
    return cli("audit", "--live", "--backend", "litellm", "--model", "openai/gpt-4o-mini",
              "--api-base", server.url, "--store", str(tmp_path / "s.sqlite"), "--recordings",
              "--benchmarks", "bbq", "--limit", "1", "--rotations", "none", "--n-boot", "100",
              "--out", str(tmp_path / out), *extra)


def test_budget_exit_4(tmp_path, cli):
    """gpt-4o-mini through the loopback server, priced by litellm's local cost map
    (about 3e-5 $ a call here): a 0.0003 $ budget stops the run part-way, exit 4."""
    def letters(prompt: str) -> dict[str, float]:
        return {"a": 0.5, "b": 0.3, "c": 0.2}
    with FaultServer(answers=letters, tokenizer=tiktoken_counter("o200k_base"),
                     chat_overhead=True) as s:
        r = cli("audit", "--live", "--backend", "litellm", "--model", "openai/gpt-4o-mini",
               "--api-base", s.url, "--store", str(tmp_path / "s.sqlite"), "--recordings",
               "--benchmarks", "consistency", "--limit", "1", "--repeats", "5", "--n-boot",
               "100", "--max-cost", "0.0003", "--batch-size", "1", "--out", str(tmp_path / "o"))
        assert 0 < len(s.hits) < 40
    assert r.returncode == 4, r.stdout + r.stderr
    no_traceback(r)
    assert "budget reached" in r.stderr


@needs_bbq
def test_nothing_evaluated_exit_5(predictions, tmp_path, cli):
    """Every rule not evaluable (here: a min_n no file reaches) is not a green run."""
    t = tmp_path / "t.yaml"
    t.write_text("version: 1\nbenchmark_rules: false\nrules:\n"
                 "  - id: accuracy_needs_a_million\n    table: bbq\n"
                 "    metric: accuracy\n    scope: {polarity: null}\n    op: \">=\"\n"
                 "    bound: 0.5\n    min_n: 1000000\n    rationale: out of reach\n",
                 encoding="utf-8")
    r = cli("bbq", "score", "--predictions", str(predictions["perfect"]), "--n-boot", "100",
           "--thresholds", str(t), "--format", "table")
    assert r.returncode == 5, r.stdout + r.stderr
    assert "nothing was evaluated" in r.stdout


def test_requests_that_end_in_errors_exit_6(tmp_path, cli):
    """Issue 27: a server that answers every request with an error (HTTP 400, not
    retried) made a normal card, "sf_bound pass" and exit 1. Now: exit 6 naming how
    many failed and the first error, the summary counts sent / from store / failed, and
    no rule passes on the cells that have no valid answer. Issue 32: a failed request is
    no answer (it showed invalid_rate 1 and failed invalid_rate_bound beside the
    INCOMPLETE banner): with every request failed there is no answer to compute a BBQ
    table from, and no rule passes or fails."""
    with FaultServer(default="400", answers=lambda prompt: {"a": 0.6, "b": 0.3, "c": 0.1}) as s:
        r = _live(cli, s, tmp_path)
        s.default = "ok"                   # the server recovers: a rerun asks only those
        again = _live(cli, s, tmp_path, out="o2")
        assert len(s.hits) == 16
    assert again.returncode != 6, again.stderr
    meta2 = json.loads((tmp_path / "o2" / "run" / "run.json").read_text())
    assert meta2["requests"]["bbq_new"] == 8            # was 0: error rows replaced
    assert meta2["asking"]["counts"]["bbq"]["failed"] == 0
    assert r.returncode == 6, r.stdout + r.stderr
    no_traceback(r)
    assert "incomplete: 8 of 8 requests ended in an error" in r.stderr
    assert "bad request" in r.stderr                  # the first error's message
    assert "bbq 8 (8 sent, 0 from the store, 8 failed)" in r.stdout
    meta = json.loads((tmp_path / "o" / "run" / "run.json").read_text())
    assert meta["asking"]["counts"]["bbq"]["failed"] == 8
    v = pd.read_csv(tmp_path / "o" / "run" / "verdicts.csv")
    sf = v[v["rule"] == "sf_bound"]
    assert len(sf) and (sf["status"] == "not_evaluable").all()
    assert (v["status"] == "not_evaluable").all(), v[["rule", "status", "why"]]
    assert v.loc[v["rule"] == "invalid_rate_bound", "why"].str.contains(
        "'bbq' is not in this run").all()
    assert meta["bbq"]["n_answers"] == 0 and meta["bbq"]["invalid_answers"] == 0


# ----------------------------------------------------------------------------- 70 and 130

@needs_bbq
def test_unexpected_fault_exit_70_one_line_and_a_log(predictions, tmp_path, cli):
    """A fault no validator catches (an empty verdicts.csv in a run directory: pandas
    raises EmptyDataError) is exit 70, one line on stderr naming a log file that holds
    the traceback; never exit 1, never a traceback on the terminal."""
    run = tmp_path / "run"
    assert cli("bbq", "score", "--predictions", str(predictions["perfect"]), "--n-boot", "100",
               "--out", str(run), "--no-rules").returncode == 0
    (run / "verdicts.csv").write_text("", encoding="utf-8")
    r = cli("card", "--run", str(run), "--out", str(tmp_path / "card"))
    if r.returncode == 2:                            # validated since: bad input, one line
        assert len(r.stderr.strip().splitlines()) == 1
        pytest.skip("an empty verdicts.csv is validated now; no unvalidated fault left here")
    assert r.returncode == 70, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "internal error" in lines[0]
    no_traceback(r)
    log = Path(lines[0].split("traceback is in ")[1].split(";")[0])
    assert "Traceback" in log.read_text(encoding="utf-8")
    log.unlink()


def _default_sigint() -> None:
    """In the child before exec: SIGINT back to its default. A job started with ``&`` by a
    non-interactive shell inherits SIGINT ignored, and Python then installs no
    KeyboardInterrupt handler: the signal would never reach the run."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@needs_bbq
def test_ctrl_c_exit_130_one_line_and_the_old_output_whole(predictions, tmp_path, cli,
                                                           warm_store):
    """Defect: Ctrl-C printed 26-46 lines of KeyboardInterrupt (exit 1) and, during the
    card step, left the new run/ beside the old card/. Now SIGINT while the audit writes
    its output: exit 130, one line, and --out is the old output, whole.

    The audit replays the generative grid from a copy of the session's recorded store
    (no import to wait for): its output step (3,200 records, ten tables, the card) takes
    about 0.8 s, so the signal sent on the "writing" stage line lands inside it; a run
    that finished before the signal (a very loaded machine) is tried again, up to 5
    times. (A one-item BBQ run wrote in 0.1 s: under load the signal missed it.)"""
    out = tmp_path / "o"
    first = cli("bbq", "score", "--predictions", str(predictions["perfect"]), "--n-boot", "100",
                "--out", str(out), "--no-rules")
    assert first.returncode == 0
    for _attempt in range(5):
        before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
        p = subprocess.Popen([sys.executable, "-m", "fairness_tests", "audit", "--benchmarks",
                              "generative", "--n-boot", "100",
                              "--store", str(warm_store), "--out", str(out)],
                             cwd=ROOT, env=env(), preexec_fn=_default_sigint,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        err = []
        with kill_after(p, 150) as killed:   # a run that hangs writes no line: killed
            for line in p.stderr:            # stage lines: interrupt while it writes
                err.append(line)
                if "writing the run and the card" in line:
                    p.send_signal(signal.SIGINT)
                    break
            rest_out, rest_err = p.communicate(timeout=60)
        if killed.is_set():
            pytest.fail(f"{p.args} wrote no 'writing the run and the card' line in 150 s "
                        f"(killed); stderr:\n{''.join(err)[-3000:]}", pytrace=False)
        err.append(rest_err)
        stderr = "".join(err)
        if p.returncode in (0, 1) and "interrupted" not in stderr:
            continue                         # finished before the signal landed: again
        break
    else:
        pytest.skip("the run finished before the signal landed, 5 times")  # pragma: no cover
    assert p.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    assert sum("interrupted" in x for x in stderr.splitlines()) == 1
    after = {q.relative_to(out): q.read_bytes() for q in out.rglob("*") if q.is_file()}
    new_whole = (out / "run" / "run.json").exists() and (out / "card" / "card.html").exists()
    assert after == before or new_whole
    assert not [q for q in tmp_path.iterdir() if q.name.startswith(".o.")]   # no temp left


# ----------------------------------------------------------------------------- pytest

def _one_error_line(p: subprocess.CompletedProcess, *words: str) -> None:
    text = p.stdout + p.stderr
    assert p.returncode == 4, text
    errors = [x for x in text.splitlines() if x.startswith("ERROR")]
    assert len(errors) == 1, text
    for w in words:
        assert w in errors[0], errors[0]
    for frame in ("/_pytest/", "/pluggy/", "Traceback", "ERROR collecting"):
        assert frame not in text, text


#: pytest in a repository ``fairness-tests init`` made (its fairness suite, no BBQ data):
#: the options of each session
PYTEST_CASES = {
    "bad_protocol": lambda d: ["--fairness-benchmarks", "bbqq"],
    "store_is_a_directory": lambda d: ["--fairness-store", str(d / "sdir")],
    "no_bbq_data": lambda d: ["--fairness-bbq-dir", str(d / "none")],
    "bbq_file_missing": lambda d: ["--fairness-bbq-dir", str(d / "bbq")],
    "xdist": lambda d: ["-n", "2", "--fairness-bbq-dir", str(d / "none")],
}


@pytest.fixture(scope="module")
def pytest_runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """Each of :data:`PYTEST_CASES` as a ``python -m pytest`` process in the initialised
    repository, all started together (their start-up overlaps)."""
    d = tmp_path_factory.mktemp("repo")
    repo = d / "repo"
    assert main(["init", "--dir", str(repo)]) == 0
    (d / "sdir").mkdir()
    (d / "bbq").mkdir()
    (d / "bbq" / "Race_x_SES.jsonl").write_text("", encoding="utf-8")
    procs = {case: subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-p", "no:randomly",
         *opts(d)], cwd=repo, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for case, opts in PYTEST_CASES.items()}
    outs = finish(procs.values(), 240)        # under the first test's bound (300 s)
    return {case: subprocess.CompletedProcess(p.args, p.returncode, *o)
            for (case, p), o in zip(procs.items(), outs, strict=True)}


def test_pytest_bad_protocol_is_one_error_line_exit_4(pytest_runs):
    _one_error_line(pytest_runs["bad_protocol"], "--fairness-benchmarks", "bbq")


@pytest.mark.parametrize("case", ["store_is_a_directory", "no_bbq_data", "bbq_file_missing"])
def test_pytest_collection_usage_errors_are_one_error_line_exit_4(pytest_runs, case):
    """Defect: raised while collecting, these printed ~25 lines of pluggy/_pytest frames
    and exit 1. Every "BBQ data not found" says how to get the data, in the line."""
    words = {"store_is_a_directory": ("sdir",),
             "no_bbq_data": ("BBQ data not found", "fairness-tests data fetch", "--from DIR",
                             "FAIRNESS_BBQ_DIR", "--fairness-bbq-dir", "--dest .fairness/bbq"),
             "bbq_file_missing": ("Race_x_gender.jsonl", "fairness-tests data fetch")}[case]
    _one_error_line(pytest_runs[case], *words)


def test_pytest_usage_error_under_xdist_is_one_error_line_exit_4(pytest_runs):
    """Under xdist a worker's usage error used to vanish (exit 5, "no tests ran")."""
    p = pytest_runs["xdist"]
    text = p.stdout + p.stderr
    assert p.returncode == 4, text
    errors = [x for x in text.splitlines() if x.startswith("ERROR")]
    assert len(errors) == 1 and "BBQ data not found" in errors[0], text
    assert "Traceback" not in text and "/_pytest/" not in text
    # issue 32: the error first, no syrupy block (it warned that no worker reported)
    assert "syrupy" not in p.stderr.split("ERROR: ")[0], text
    assert "snapshot" not in text and "warnings summary" not in text, text
