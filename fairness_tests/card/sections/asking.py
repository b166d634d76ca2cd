"""Section 5's record of how the model was asked (run metadata ``asking``): the repeat
mode and its fallback, token / reasoning / cost budgets and what was spent, the shard
and merged stores; per protocol the requests sent, answered from the store, failed
(with the first error) and invalid; the share of prompts whose letter mass was below
the floor; an API model's prompt format; with ``--batch``, the provider batch jobs
(:func:`batch_statement`). Read defensively: a run recorded before a
field existed simply lacks it (nothing is shown for it, nothing invented). A cost the
provider did not price is "unknown", never 0.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from fairness_tests.models.requests.repeat_modes import MIN_LETTER_MASS

COUNT_KEYS = ("requests", "sent", "from_store", "failed", "invalid", "refused", "truncated",
              "letter_prompts", "low_mass_prompts")


def request_counts(a) -> list[dict[str, Any]]:
    """Per protocol, what the asking did (``asking.counts``: protocol -> AskCounts or its
    dict, or a list of them with a ``label``; absent in runs before it was recorded: [])."""
    raw = getattr(a, "counts", None) or {}
    items = list(raw.items()) if isinstance(raw, dict) else [(None, c) for c in raw]
    out = []
    for name, c in items:
        d = c if isinstance(c, dict) else (c.to_dict() if hasattr(c, "to_dict") else vars(c))
        row: dict[str, Any] = {"protocol": str(name or d.get("label") or "all")}
        row.update({k: int(d.get(k) or 0) for k in COUNT_KEYS})
        if d.get("first_error"):
            row["first_error"] = str(d["first_error"])
        if row["letter_prompts"]:
            row["low_mass_share"] = row["low_mass_prompts"] / row["letter_prompts"]
        out.append(row)
    return sorted(out, key=lambda r: r["protocol"])


def letter_mass(rows: list[dict[str, Any]], floor: float = MIN_LETTER_MASS) -> dict | None:
    """The share of prompts asked for letter probabilities whose letter mass (the
    probability of the answer letters together) was below ``floor``; None when no
    prompt carried a letter distribution."""
    prompts = sum(r["letter_prompts"] for r in rows)
    if not prompts:
        return None
    below = sum(r["low_mass_prompts"] for r in rows)
    share = below / prompts
    everywhere = below == prompts
    statement = (f"{f'all {prompts}' if everywhere else f'{below} of {prompts}'} prompt(s) "
                 "asked for letter "
                 f"probabilities ({share:.0%}) had a letter mass below {floor:g}: "
                 + ("the model's probability sits almost entirely outside the answer letters, "
                    "so no letter distribution of this run is usable (through an API with "
                    "logprobs such answers count as invalid)" if everywhere else
                    "their letter distributions are unusable (through an API with logprobs "
                    "such answers count as invalid)" if below else "every distribution usable"))
    return {"floor": floor, "prompts": prompts, "below": below, "share": share,
            "everywhere": everywhere, "statement": statement + "."}


def usage_dict(usage: Any) -> dict | None:
    """The run's usage as a mapping (a :class:`~fairness_tests.models.info.Usage`,
    or the dict an older run recorded)."""
    if usage is None or isinstance(usage, dict):
        return usage
    return dataclasses.asdict(usage)


def _cost(usage: dict | None) -> float | str | None:
    """The cost of a live run: a number, or "unknown" when any reply had no price
    (never 0 standing for unknown); None when the run recorded no usage."""
    if not usage or "cost_usd" not in usage:
        return None
    c = usage["cost_usd"]
    return "unknown" if c is None or usage.get("cost_unknown_calls") else float(c)


def _spent(usage: dict) -> str:
    """What a live run used, cost included ("cost unknown" when it is)."""
    parts = [f"{k} {usage[k]:g}" if isinstance(usage[k], float) else f"{k} {usage[k]}"
             for k in sorted(usage) if isinstance(usage[k], (int, float))
             and not isinstance(usage[k], bool) and not k.startswith("cost_")]
    cost = _cost(usage)
    if cost == "unknown":
        known = usage.get("cost_known_usd")
        n = usage.get("cost_unknown_calls")
        parts.append("cost unknown" + (f" ({n} call(s) without a price" if n else " (")
                     + (f"; {known:.4f} USD for the priced ones)" if known else ")"))
    elif cost is not None:
        parts.append(f"cost {cost:.4f} USD")
    return ", ".join(parts)


PROMPT_WORDS = {
    "chat": "the messages as given (a chat endpoint renders them with the server's chat "
            "template, a completion endpoint gets their contents joined; no answer prefix, "
            "no stop)",
    "chat-prefill": "the messages, then an assistant turn holding the answer prefix",
    "completion-gemma": "Gemma's turn format as plain text to the completion endpoint, "
                        "then the answer prefix",
    "completion-plain": "role: content lines as plain text to the completion endpoint, "
                        "then the answer prefix",
}


def prompt_statement(p: dict | None) -> str | None:
    """How an API model's prompts were sent (``asking.prompt``), in words; None when the
    run did not record it (a local backend, an older run)."""
    if not p or not p.get("used"):
        return None
    used, req = p["used"], p.get("requested")
    text = f"prompt format {used}" + (f" ({req} for this model)" if req and req != used
                                      else "")
    words = PROMPT_WORDS.get(used)
    if words:
        text += f": {words}"
    if p.get("answer_prefix"):
        text += f" {p['answer_prefix']!r}"
    if p.get("stop"):
        text += ", stop at " + " or ".join("newline" if x == "\n" else repr(x)
                                           for x in p["stop"])
    return text


def asking(a) -> dict[str, Any]:
    """How the model was asked (:class:`~fairness_tests.run.metadata.AskingInfo`) and
    one statement of it: the repeat mode used (and any fallback), whether repeats
    share one server-side forward pass, the token, reasoning and cost budgets, what was
    spent (a cost without a price is "unknown"), the shard, the stores merged into the
    one the run read; per protocol the requests sent, answered from the store, failed
    (the run is then incomplete) and invalid, and the share of prompts whose letter
    mass was below the floor."""
    mode = dict(a.repeat_mode or {})
    usage = usage_dict(a.usage)
    parts = []
    used, req = mode.get("used"), mode.get("requested")
    if used == "local":
        parts.append("repeats drawn from the letter distribution of one local forward pass")
    elif used:
        parts.append(f"repeat mode {used}" + (f" (asked for {req})" if req and req != used else ""))
        if mode.get("fallback"):
            parts.append(f"fallback: {mode['fallback']}")
        parts.append("repeats share one server-side forward pass, so between-call "
                     "nondeterminism is not measured" if mode.get("shared_forward_pass") else
                     "one request per repeat, so between-call nondeterminism is measured")
    prompt = getattr(a, "prompt", None)
    statement = prompt_statement(prompt)
    if statement:
        parts.append(statement)
    parts.append(f"max_tokens {a.max_tokens}")
    if a.reasoning_effort:
        parts.append(f"reasoning effort {a.reasoning_effort}")
    if a.thinking_budget:
        parts.append(f"thinking budget {a.thinking_budget} tokens")
    parts.append(f"cost budget {a.max_cost_usd:g} USD" if a.max_cost_usd is not None
                 else "no cost budget")
    if usage and _spent(usage):
        parts.append(f"spent: {_spent(usage)}")
    trunc = {k: v for k, v in (a.truncated or {}).items() if v}
    if trunc:
        parts.append("truncated answers: "
                     + ", ".join(f"{k} {v}" for k, v in sorted(trunc.items())))
    if a.shard:
        parts.append(f"recorded as shard {a.shard}")
    if a.merged_from:
        parts.append("store merged from " + ", ".join(
            f"{x.get('source')} ({x.get('rows')} rows, {x.get('added')} new)"
            for x in a.merged_from))
    batch = getattr(a, "batch", None)
    if batch is not None:
        batch = batch if isinstance(batch, dict) else dataclasses.asdict(batch)
        parts.append(batch_statement(batch))
    counts = request_counts(a)
    if counts:
        parts.append("requests: " + "; ".join(
            f"{r['protocol']} {r['requests']} ({r['sent']} sent, {r['from_store']} from the "
            f"store, {r['failed']} failed, {r['invalid']} invalid)" for r in counts))
    out: dict[str, Any] = {"repeat_mode": mode, "max_tokens": a.max_tokens,
                           "statement": "; ".join(parts) + "."}
    for key in ("reasoning_effort", "thinking_budget", "max_cost_usd", "shard"):
        if getattr(a, key) is not None:
            out[key] = getattr(a, key)
    if usage is not None:
        out["usage"] = usage
    if trunc:
        out["truncated"] = trunc
    if a.merged_from:
        out["merged_from"] = list(a.merged_from)
    if prompt:
        out["prompt"] = {k: v for k, v in prompt.items() if v is not None}
    if batch is not None:
        out["batch"] = batch
    cost = _cost(usage)
    if cost is not None:
        out["cost_usd"] = cost
    if counts:
        out["requests"] = counts
        failed = sum(r["failed"] for r in counts)
        if failed:
            inc = {"failed": failed, "requests": sum(r["requests"] for r in counts)}
            first = [r["first_error"] for r in counts if r.get("first_error")]
            if first:
                inc["first_error"] = first[0]
            out["incomplete"] = inc
        lm = letter_mass(counts)
        if lm:
            out["letter_mass"] = lm
    return out


def batch_statement(b: dict[str, Any]) -> str:
    """``--batch`` in one clause: the jobs (ids, status, when submitted and completed),
    the endpoint and completion window, the discount billed, and the lines that fell back."""
    jobs = b.get("jobs") or []
    listed = ", ".join(f"{j['batch_id']} ({j.get('label', '?')}, {j.get('status')}, "
                       f"{j.get('lines', '?')} lines, submitted {j.get('submitted_at')}, "
                       f"completed {j.get('completed_at') or 'not yet'})" for j in jobs[:10])
    more = f" and {len(jobs) - 10} more" if len(jobs) > 10 else ""
    price = (f"billed at the batch price ({b.get('discount')} off the direct price: "
             f"{b.get('price_source')})" if b.get("price_source")
             else "batch price unknown (no batch price in litellm's cost map)")
    fell = (f"{b.get('resubmitted', 0)} failed or expired line request(s) resubmitted once, "
            f"{b.get('direct', 0)} asked directly, {b.get('missing', 0)} missing (error rows)")
    return (f"batch mode: answered through {len(jobs)} provider batch job(s) at "
            f"{b.get('endpoint')} with a {b.get('completion_window')} completion window "
            f"[{listed}{more}], {price}; fell back: {fell}")
