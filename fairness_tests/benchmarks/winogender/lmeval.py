"""lm-evaluation-harness's own ``winogender_*`` tasks (0.4.13), run on this tool's fields of
the authors' files instead of their Hugging Face copy: the reference the bench
(``bench/bench_winogender_vs_lmeval.py``) and the equality test compare against.

Each task's YAML is read by lm-eval's own loader (``lm_eval.tasks._yaml_loader.load_yaml``:
``include`` and ``!function utils.filter_*`` resolved) and only where the documents come
from is changed: ``dataset_path: json`` on ``all.jsonl`` (the fields ``sentid, sentence,
pronoun, occupation, participant, gender, target, label`` of every sentence, as
:func:`~.data.sentences` builds them) or, for the ``gotcha`` tasks (their
``dataset_name: gotcha``), ``gotcha.jsonl`` (the gotcha sentences with ``gotcha: true``, as
the dataset's ``gotcha.tsv``). Everything else (their prompt, choices, target, document
filters, ``acc``) is lm-eval's code, run by ``lm_eval.evaluator.evaluate``. lm_eval is an
optional dependency (imported here, when a comparison runs)."""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pandas as pd

#: lm-eval's task -> this tool's ``winogender`` cell (subset, gender)
TASKS = {"winogender_all": ("all", "all"), "winogender_male": ("all", "male"),
         "winogender_female": ("all", "female"), "winogender_neutral": ("all", "neutral"),
         "winogender_gotcha": ("gotcha", "all"), "winogender_gotcha_male": ("gotcha", "male"),
         "winogender_gotcha_female": ("gotcha", "female")}
FIELDS = ["sentid", "sentence", "pronoun", "occupation", "participant", "gender", "target",
          "label"]


def write_dataset(items: pd.DataFrame, directory: Path) -> dict[str, Path]:
    """``all.jsonl`` and ``gotcha.jsonl`` of ``items`` in ``directory`` (module docstring)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {"all": directory / "all.jsonl", "gotcha": directory / "gotcha.jsonl"}
    items[FIELDS].to_json(paths["all"], orient="records", lines=True, force_ascii=False)
    items.loc[items["gotcha"], [*FIELDS, "gotcha"]].to_json(
        paths["gotcha"], orient="records", lines=True, force_ascii=False)
    return paths


def tasks(items: pd.DataFrame, directory: Path, names: tuple[str, ...] = tuple(TASKS)
          ) -> dict[str, Any]:
    """``{task name: lm-eval ConfigurableTask}`` reading ``items`` (written to ``directory``)."""
    lm_eval = importlib.import_module("lm_eval")
    load_yaml = importlib.import_module("lm_eval.tasks._yaml_loader").load_yaml
    task_cls = importlib.import_module("lm_eval.api.task").ConfigurableTask
    paths = write_dataset(items, directory)
    base = Path(str(lm_eval.__file__)).parent / "tasks" / "winogender"
    out = {}
    for name in names:
        path = base / ("winogender.yaml" if name == "winogender_all" else f"{name}.yaml")
        cfg = load_yaml(path)
        subset = cfg.get("dataset_name")
        if cfg.get("task") != name or subset not in paths:
            raise ValueError(f"{path}: task {cfg.get('task')!r}, dataset_name {subset!r}")
        cfg.pop("tag", None)
        cfg.update(dataset_path="json", dataset_name=None, dataset_kwargs={
            "data_files": {cfg["test_split"]: str(paths[subset])},
            "cache_dir": str(directory / "hf-cache")})
        out[name] = task_cls(config=cfg)
    return out


def evaluate(lm: Any, task_dict: dict[str, Any]) -> dict[str, Any]:
    """lm-eval's ``evaluate`` of the tasks with ``lm`` (samples logged, no bootstrap):
    ``{"acc": {task: acc}, "loglik": {task: {sentid: (ll_occupation, ll_participant)}}}``."""
    evaluator = importlib.import_module("lm_eval.evaluator")
    res = evaluator.evaluate(lm=lm, task_dict={"tasks": task_dict, "groups": {}, "group_map": {}},
                             log_samples=True, bootstrap_iters=0, verbosity="ERROR")
    acc = {name: float(res["results"][name]["acc,none"]) for name in task_dict}
    loglik = {name: {s["doc"]["sentid"]: tuple(float(r[0][0]) for r in s["resps"])
                     for s in res["samples"][name]} for name in task_dict}
    return {"acc": acc, "loglik": loglik}
