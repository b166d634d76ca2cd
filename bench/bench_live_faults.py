"""What an API run says when the server misbehaves: ``fairness-tests audit --live``
against the loopback stand-in (``tests/fault_server.py``) in each of the states issue 27
names, and the base model over ``/v1/completions`` in two prompt formats. The figures of
docs/api_models.md ("When the server misbehaves").

Each scenario runs the command a user runs (``python -m fairness_tests audit`` as a
subprocess, fresh store) with ``--benchmarks consistency --limit 1 --repeats 5``: 8 items
(1 per dataset x context x polarity cell) x 5 repeats = 40 answers from 8 prompts, and
prints the exit code, the requests the server saw, the ``fairness-tests:`` lines of
stderr, the summary's last lines, what ``run.json`` records (requests, repeat mode,
usage, invalid answers, notes) and the card's "How the model was asked" statement.

Scenarios: ``down`` (nothing listens on the port), ``half-down`` (the server answers
the first 20 requests, then HTTP 500 to every one), ``logprobs-500`` (llama.cpp's
server with ``logits_all=False``: HTTP 500 "logprobs is not supported ..."),
``n-ignored`` (llama.cpp's server: ``n`` dropped, one choice), ``low-mass`` (logprobs
whose letters hold 4% of the probability, top 5 only), ``base-auto`` / ``base-chat``
(a base model on ``/v1/completions`` that runs on unless the prompt ends with "(":
``text-completion-openai/`` with the default prompt format, and with ``chat``, the
contents joined as this path sent them before).

    python bench/bench_live_faults.py [--only down half-down ...]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from fault_server import FaultServer  # noqa: E402

ENV = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1",
           FAIRNESS_PROGRESS="off", PYTHONPATH=str(ROOT))


def letters(prompt: str) -> dict[str, float]:
    return {"a": 0.5, "b": 0.3, "c": 0.15, "Unknown": 0.05}


def low_mass(prompt: str) -> dict[str, float]:
    """A model whose first token is mostly not a letter: the letters hold 0.04."""
    return {"The": 0.5, "\n\n": 0.3, "Based": 0.16, "a": 0.02, "b": 0.01, "c": 0.01}


class HalfDown(FaultServer):
    """Answers the first ``up_for`` requests, then HTTP 500 to every one."""
    up_for = 20

    def _respond(self, h, body, prompt, fault, chat):
        if len(self.hits) > self.up_for:
            fault = "500"
        super()._respond(h, body, prompt, fault, chat)


def dead_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


SCENARIOS = {
    "down": (None, "openai/unpriced-model", ()),
    "half-down": (lambda: HalfDown(answers=letters), "openai/unpriced-model", ()),
    "logprobs-500": (lambda: FaultServer.llama_cpp(answers=letters), "openai/gemma-x",
                     ("--repeat-mode", "logprobs")),
    "n-ignored": (lambda: FaultServer.llama_cpp(answers=letters), "openai/gemma-x",
                  ("--repeat-mode", "n")),
    "low-mass": (lambda: FaultServer(answers=low_mass, top_logprobs_limit=5),
                 "openai/gemma-x", ("--repeat-mode", "logprobs")),
    "base-auto": (lambda: FaultServer.llama_cpp(answers=letters),
                  "text-completion-openai/base-x", ()),
    "base-chat": (lambda: FaultServer.llama_cpp(answers=letters),
                  "text-completion-openai/base-x", ("--prompt-format", "chat")),
}


def run(name: str, work: Path) -> dict:
    make, model, extra = SCENARIOS[name]
    server = make().start() if make else None
    base = server.url if server else dead_port()
    out = work / name
    cmd = [sys.executable, "-m", "fairness_tests", "audit", "--live", "--backend", "litellm",
           "--model", model, "--api-base", base, "--store", str(out / "s.sqlite"),
           "--recordings", "--benchmarks", "consistency", "--limit", "1", "--repeats", "5",
           "--n-boot", "100", "--out", str(out / "report"), *extra]
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=ROOT,
                          timeout=1200)
    wall = time.monotonic() - t0
    hits = len(server.hits) if server else 0
    if server:
        server.stop()
    fig = {"scenario": name, "exit": done.returncode, "server_requests": hits,
           "wall_s": round(wall, 1),
           "stderr": [x for x in done.stderr.splitlines() if x.startswith("fairness-tests")],
           "unclosed_warnings": done.stderr.count("Unclosed"),
           "stdout_tail": [x for x in done.stdout.splitlines()
                           if x.startswith(("spent", "repeat mode", "mfaa", "gtc",
                                            "invalid"))]}
    run_json = out / "report" / "run" / "run.json"
    if run_json.exists():
        m = json.loads(run_json.read_text())
        a = m.get("asking") or {}
        fig.update(requests=m["requests"], repeat_mode=a.get("repeat_mode"),
                   usage=a.get("usage"), prompt=a.get("prompt"), notes=m["notes"],
                   answers=(m.get("bbq") or {}).get("n_answers"),
                   invalid=(m.get("bbq") or {}).get("invalid_answers"))
        card = (out / "report" / "card" / "card.md").read_text()
        fig["card"] = [x for x in card.splitlines() if "How the model was asked" in x]
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=list(SCENARIOS), default=list(SCENARIOS))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only:
            print(json.dumps(run(name, Path(tmp)), indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
