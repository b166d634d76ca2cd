"""lm-evaluation-harness's own ``crows_pairs_english`` task (0.4.13), run on the authors'
file instead of its Hugging Face copy (``jannalu/crows_pairs_multilingual``, ``english``):
the reference the bench (``bench/bench_crows_pairs_vs_lmeval.py``) and the equality tests
compare against.

The task's YAML is read by lm-eval's own loader (``lm_eval.tasks._yaml_loader.load_yaml``:
its ``!function utils.doc_to_choice`` and ``utils.process_results`` resolved) and only where
the documents come from is changed: ``custom_dataset`` returns the rows of
:func:`documents`, built from ``crows_pairs_anonymized.csv`` as this tool reads it
(:mod:`.data`, every field the text in the file): ``sent_more``, ``sent_less``,
``stereo_antistereo``, ``bias_type`` (the fields lm-eval's task reads: its choices, and the
per-type tasks' filters) and ``pair_id`` (the unnamed first column), in file order.
Everything else (empty context, ``target_delimiter: ""``, the choices, ``process_results``,
the ``mean`` aggregation) is lm-eval's code, run by ``lm_eval.evaluator.evaluate``. lm_eval
and datasets are optional dependencies (imported here, when a comparison runs)."""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from fairness_tests.benchmarks.crows_pairs.data import Pair

TASK = "crows_pairs_english"


def documents(pairs: tuple[Pair, ...]) -> list[dict[str, Any]]:
    """lm-eval's documents of ``pairs``: the four fields its task reads, and ``pair_id``."""
    return [{"pair_id": p.pair_id, "sent_more": p.sent_more, "sent_less": p.sent_less,
             "stereo_antistereo": p.stereo_antistereo, "bias_type": p.bias_type} for p in pairs]


def task(pairs: tuple[Pair, ...]) -> Any:
    """lm-eval's ``crows_pairs_english`` ``ConfigurableTask`` on ``pairs``."""
    lm_eval = importlib.import_module("lm_eval")
    datasets = importlib.import_module("datasets")
    load_yaml = importlib.import_module("lm_eval.tasks._yaml_loader").load_yaml
    task_cls = importlib.import_module("lm_eval.api.task").ConfigurableTask
    path = Path(str(lm_eval.__file__)).parent / "tasks" / "crows_pairs" / f"{TASK}.yaml"
    cfg = load_yaml(path)
    if cfg.get("task") != TASK:
        raise ValueError(f"{path}: task {cfg.get('task')!r}, not {TASK}")
    rows = documents(pairs)
    cfg["custom_dataset"] = lambda **_: datasets.DatasetDict(
        {cfg["test_split"]: datasets.Dataset.from_list(rows)})
    return task_cls(config=cfg)


def evaluate(lm: Any, pairs: tuple[Pair, ...]) -> dict[str, Any]:
    """lm-eval's evaluation of ``pairs`` with ``lm`` (samples logged, no bootstrap): per
    pair, in ``pairs`` order, ``pair_id``, the two log-likelihoods (``ll_more``,
    ``ll_less``) and lm-eval's per-pair ``pct_stereotype`` / ``likelihood_diff``; ``agg``:
    its two aggregates (``pct_stereotype`` a share, not a percentage)."""
    evaluator = importlib.import_module("lm_eval.evaluator")
    res = evaluator.evaluate(lm=lm, task_dict={"tasks": {TASK: task(pairs)}, "groups": {},
                                               "group_map": {}},
                             log_samples=True, bootstrap_iters=0, verbosity="ERROR")
    samples = sorted(res["samples"][TASK], key=lambda s: s["doc_id"])
    out: dict[str, Any] = {"pair_id": [s["doc"]["pair_id"] for s in samples]}
    out["ll_more"] = [float(s["resps"][0][0][0]) for s in samples]
    out["ll_less"] = [float(s["resps"][1][0][0]) for s in samples]
    for m in ("pct_stereotype", "likelihood_diff"):
        out[m] = [float(s[m]) for s in samples]
    r = res["results"][TASK]
    out["agg"] = {m: float(r[f"{m},none"]) for m in ("pct_stereotype", "likelihood_diff")}
    return out


def hflm(model_dir: str | Path, batch_size: int) -> Any:
    """lm-eval's ``HFLM`` on a checkpoint directory, float32, CPU."""
    huggingface = importlib.import_module("lm_eval.models.huggingface")
    return huggingface.HFLM(pretrained=str(model_dir), device="cpu", dtype="float32",
                            batch_size=batch_size)
