"""Grid rows -> :class:`~fairness_tests.models.requests.request.Request`; responses -> records.

A request is ``kind="generate"`` with the system prompt + the row's ``prompt_text``,
``Decoding(temperature, top_p, max_tokens=max_new_tokens)`` and ``seed``; its ``meta`` is
the grid row. :func:`records` joins meta + response into the published raw-output
fields (plus ``row_id``, ``full_slice_id``, ``prompt_text``, ``error``); the output
text is whitespace-stripped, as in the published audit.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import pandas as pd

from fairness_tests.benchmarks.generative.grid import GRID_COLUMNS, RAW_OUTPUT_FIELDS
from fairness_tests.models.requests.request import Decoding, Request, Response, chat


def grid_requests(grid: pd.DataFrame, system_prompt: str | None, backend: str = "replay",
                  model: str = "", api_base: str | None = None) -> list[Request]:
    """One generate request per grid row, in grid order."""
    out = []
    for row in grid[GRID_COLUMNS].to_dict(orient="records"):
        meta = {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
        out.append(Request(
            messages=chat(system_prompt, str(meta["prompt_text"])),
            decoding=Decoding(temperature=float(meta["temperature"]), top_p=float(meta["top_p"]),
                              max_tokens=int(meta["max_new_tokens"])),
            seed=int(meta["seed"]), backend=backend, model=model, api_base=api_base,
            kind="generate", meta=meta,
        ))
    return out


RECORD_COLUMNS = ["row_id", *RAW_OUTPUT_FIELDS, "full_slice_id", "prompt_text", "error"]


def records(requests: Sequence[Request], responses: Iterable[Response]) -> pd.DataFrame:
    """Records table (one row per request, same order): meta + response text/status.
    A response whose key does not match its request is a programming error."""
    rows = []
    for req, resp in zip(requests, responses, strict=True):
        if resp.key != req.key():
            raise ValueError(f"response key {resp.key[:12]} does not match request "
                             f"{req.key()[:12]} (row_id {req.meta.get('row_id')})")
        m = req.meta
        rows.append({
            "row_id": m.get("row_id"), "prompt_family": m["prompt_family"],
            "paraphrase_id": m["paraphrase_id"], "occupation": m["occupation"],
            "slice_gender": m["slice_gender"], "slice_religion": m["slice_religion"],
            "temperature": m["temperature"], "top_p": m["top_p"], "seed": m["seed"],
            "output_text": (resp.text or "").strip(), "status": resp.status,
            "full_slice_id": m.get("full_slice_id"), "prompt_text": m.get("prompt_text"),
            "error": resp.error or "",
        })
    return pd.DataFrame(rows, columns=RECORD_COLUMNS)
