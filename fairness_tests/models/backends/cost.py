"""What a run will cost before it spends anything, and the budget that stops it.

Prices come from litellm's LOCAL cost map (``LITELLM_LOCAL_MODEL_COST_MAP=True``:
the price file bundled with the installed litellm, never fetched). Tokens are
counted with litellm's ``token_counter`` (chat messages with its per-message
overhead; the joined prompt for ``text-completion-openai/``); where litellm does
not know the model the count uses its default tokenizer (tiktoken
``cl100k_base``) and is labelled an estimate.

For one protocol's requests and one repeat mode (:func:`estimate`):

- ``responses``: answers the protocol needs (prompts x repeats);
- ``in_store``: those the store already holds (not errors; keys depend on the mode);
- ``calls``: requests still to send: one per missing response (``calls``), one
  per prompt with a missing repeat (``n``: ``n`` = the missing repeats;
  ``logprobs``);
- ``input_tokens``: sum over those calls of the prompt's tokens;
- ``output_tokens``: at most ``max_tokens`` per completion (``n`` bills every
  choice; ``logprobs`` asks for ``LOGPROBS_MAX_TOKENS``): an upper bound;
- ``cost_usd``: ``input_tokens x input price + output_tokens x output price``,
  so also an upper bound; None when the cost map has no price for the model.

:class:`BudgetReached` is what a run raises when ``--max-cost`` is reached
(exit code :data:`EXIT_BUDGET`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Callable, Iterable, Sequence

from fairness_tests.core.errors import FairnessTestsError
from fairness_tests.models.backends.base import Capabilities
from fairness_tests.models.backends.litellm_import import load_litellm
from fairness_tests.models.requests import prompt_format as PF
from fairness_tests.models.requests.repeat_modes import (
    LOGPROBS_MAX_TOKENS,
    REPEAT_MODES,
    RepeatMode,
    apply_mode,
    units,
)
from fairness_tests.models.requests.request import Request

EXIT_BUDGET = 4

_BUNDLED_TOKENIZERS = {"anthropic", "deepseek"}


class BudgetReached(FairnessTestsError):
    """The running cost reached ``--max-cost``; no new request was started after it."""

    def __init__(self, spent_usd: float, limit_usd: float, not_asked: int,
                 recorded: int | None = None):
        self.spent_usd, self.limit_usd, self.not_asked = spent_usd, limit_usd, not_asked
        self.recorded = recorded
        super().__init__(self._message())

    def _message(self) -> str:
        kept = "" if self.recorded is None else \
            f"; the {self.recorded} responses recorded by this run are kept"
        return (f"budget reached: ${self.spent_usd:.4f} spent of --max-cost "
                f"${self.limit_usd:.4f}{kept}; "
                f"requests not yet started were not asked. Run the same command again (with a "
                f"higher --max-cost) to resume: the store answers everything already recorded")

    def with_recorded(self, recorded: int) -> "BudgetReached":
        self.recorded = recorded
        self.args = (self._message(),)
        return self



@dataclass(frozen=True)
class Price:
    input_per_token: float
    output_per_token: float
    source: str


def model_price(model: str) -> Price | None:
    """The model's per-token prices from litellm's local cost map, or None."""
    litellm = load_litellm()
    try:
        info = litellm.get_model_info(model)
    except Exception:
        return None
    inp, out = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if inp is None or out is None:
        return None
    return Price(float(inp), float(out), f"litellm {_version()} local cost map "
                                         f"({info.get('key') or model})")


def _version() -> str:
    try:
        return version("litellm")
    except PackageNotFoundError:  # pragma: no cover - litellm is what prices
        return "?"


def tokenizer_of(model: str) -> tuple[str, bool]:
    """``(label, exact)``: which tokenizer litellm's token_counter uses for ``model`` and
    whether it is the model's own (False: an estimate)."""
    load_litellm()
    name = model.split("/", 1)[1] if "/" in model else model
    try:
        from litellm.utils import huggingface_tokenizer_kind  # noqa: PLC0415  heavy, optional
        kind = huggingface_tokenizer_kind(name)
    except Exception:
        kind = None
    if kind in _BUNDLED_TOKENIZERS:
        return f"litellm token_counter ({kind} tokenizer)", True
    try:
        from litellm.litellm_core_utils.token_counter import (  # noqa: PLC0415  heavy
            is_openai_model,
            openai_tokenizer_encoding_name,
        )
        if kind is None and is_openai_model(model):
            enc = openai_tokenizer_encoding_name(model)
            return f"litellm token_counter (tiktoken {enc})", True
    except Exception:
        pass
    return ("estimate: litellm token_counter's default tiktoken cl100k_base "
            "(litellm does not know this model's tokenizer)"), False


class TokenCounter:
    """Prompt tokens of a request, counted once per distinct prompt (kind, messages and
    prompt format). For ``text-completion-*`` models the text counted is the prompt the
    litellm backend sends (:mod:`.prompt_format`: the request's format, else what
    ``auto`` resolves to for the model, with the answer prefix)."""

    def __init__(self, model: str):
        self.model = model
        self.label, self.exact = tokenizer_of(model)
        self._cache: dict[tuple, int] = {}
        self._text_mode = model.startswith("text-completion")

    def __call__(self, req: Request) -> int:
        k = (req.kind, tuple((m.role, m.content) for m in req.messages), req.prompt_format,
             req.answer_prefix, req.context, req.continuation)
        n = self._cache.get(k)
        if n is None:
            self._cache[k] = n = int(self._count(req))
        return n

    def prompt_text(self, req: Request) -> str:
        """The completion prompt the litellm backend sends for ``req`` (default options;
        a loglikelihood request: its context and continuation, sent as they are)."""
        if req.kind == "loglikelihood":
            return f"{req.context or ''}{req.continuation or ''}"
        fmt = PF.resolve(req.prompt_format or PF.DEFAULT_PROMPT_FORMAT, self.model)
        return PF.render(req.messages, fmt, req.answer_prefix or PF.DEFAULT_ANSWER_PREFIX,
                         req.kind, completion=True).prompt or ""

    def _count(self, req: Request) -> int:
        litellm = load_litellm()
        if self._text_mode or req.kind == "loglikelihood":
            return litellm.token_counter(model=self.model, text=self.prompt_text(req))
        return litellm.token_counter(model=self.model, messages=[
            {"role": m.role, "content": m.content} for m in req.messages])


@dataclass
class EstimateRow:
    """One row of the dry run (see the module docstring)."""
    protocol: str
    repeat_mode: RepeatMode
    selected: bool
    responses: int
    in_store: int
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    tokens: str
    tokens_exact: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class StoredStatuses:
    """The statuses ``store`` holds, each key looked up once: the dry run counts the same
    requests per protocol, per repeat mode, in total and for prefix sharing. Answers
    :func:`still_to_ask` as the store would (``statuses(keys)``)."""

    def __init__(self, store: Any):
        self._store = store
        self._seen: dict[str, str | None] = {}

    def statuses(self, keys: Iterable[str]) -> dict[str, str]:
        keys = list(dict.fromkeys(keys))
        new = [k for k in keys if k not in self._seen]
        if new:
            got = self._store.statuses(new)
            self._seen.update({k: got.get(k) for k in new})
        return {k: s for k in keys if (s := self._seen[k]) is not None}


def still_to_ask(requests: Iterable[Request], store: Any) -> tuple[int, list[Request]]:
    """(distinct requests, the first request of each key the store does not answer
    yet: no row, or an error row)."""
    first: dict[str, Request] = {}
    for r in requests:
        first.setdefault(r.key(), r)
    got = store.statuses(first) if store is not None else {}
    held = {k for k, status in got.items() if status != "error"}
    return len(first), [r for k, r in first.items() if k not in held]


def estimate(protocol: str, requests: Sequence[Request], store: Any, counter: TokenCounter,
             price: Price | None, mode: RepeatMode, selected: bool) -> EstimateRow:
    """One row of the dry run (see the module docstring)."""
    distinct, missing = still_to_ask(apply_mode(requests, mode), store)
    calls = inp = out = 0
    for unit in units(missing):
        q = missing[unit[0]]
        calls += 1
        inp += counter(q)
        if q.repeat_mode == "logprobs":
            out += min(int(q.decoding.max_tokens), LOGPROBS_MAX_TOKENS)
        else:
            out += int(q.decoding.max_tokens) * len(unit)
    cost = None if price is None else inp * price.input_per_token + out * price.output_per_token
    return EstimateRow(protocol=protocol, repeat_mode=mode, selected=selected,
                       responses=distinct, in_store=distinct - len(missing), calls=calls,
                       input_tokens=inp, output_tokens=out, cost_usd=cost, tokens=counter.label,
                       tokens_exact=counter.exact)


class OwnTokenizerCounter(TokenCounter):
    """Prompt tokens as a local model reads them: ``count(request)`` (the transformers
    backend's ``prompt_tokens_of``: its own tokenizer over the exact prompt text), so
    exact, once per distinct prompt; what :func:`dry_run_rows` uses for a local model
    instead of litellm's."""

    label = "the model's own tokenizer over the exact prompt text (exact)"
    exact = True

    def __init__(self, count: Callable[[Request], int]):
        self._own = count
        self._cache = {}

    def _count(self, req: Request) -> int:
        return self._own(req)


def dry_run_rows(by_protocol: dict[str, list[Request]], store: Any, model: str,
                 selected_mode: RepeatMode, capabilities: Capabilities,
                 counter: TokenCounter | None = None) -> list[EstimateRow]:
    """Rows for every protocol x repeat mode, then, for more than one protocol, ``total``
    rows for the whole run (requests shared between protocols counted once). A remote
    backend (``capabilities.remote``) is priced from litellm's cost map and shown in every
    repeat mode where the protocol has multiple-choice prompts; any other only in
    ``selected_mode``, unpriced. ``counter``: litellm's :class:`TokenCounter` by default."""
    counter = counter or TokenCounter(model)
    all_modes = capabilities.remote
    price = model_price(model) if capabilities.remote else None
    rows = []
    everything: dict[str, Request] = {}
    for proto, reqs in by_protocol.items():
        for r in reqs:
            everything.setdefault(r.key(), r)
        for mode in _modes_for(reqs, selected_mode, all_modes):
            rows.append(estimate(proto, reqs, store, counter, price, mode, mode == selected_mode))
    total = list(everything.values())
    for mode in (_modes_for(total, selected_mode, all_modes) if len(by_protocol) > 1 else ()):
        rows.append(estimate("total", total, store, counter, price, mode, mode == selected_mode))
    return rows


def _modes_for(requests: Iterable[Request], selected: RepeatMode,
               all_modes: bool) -> tuple[RepeatMode, ...]:
    if not any(r.kind == "choice" for r in requests):
        return ("calls",)
    return REPEAT_MODES if all_modes else (selected,)


def format_rows(rows: Sequence[EstimateRow], model: str, price: Price | None,
                local: bool = False) -> str:
    """The dry run as a table, with what its figures mean. ``local``: a model run here
    (no price, no request shapes: the responses still to answer; the prompts and tokens
    it reads are the prefix-sharing lines the caller adds)."""
    lines = [f"dry run for {model}: nothing is asked"]
    if local:
        head = f"{'protocol':12} {'responses':>9} {'in store':>9} {'to answer':>9}"
        lines += [head, "-" * len(head)]
        lines += [f"{r.protocol:12} {r.responses:>9} {r.in_store:>9} {r.calls:>9}"
                  for r in rows]
        lines.append("to answer: responses the store does not hold. Repeats of a prompt "
                     "share its one forward pass: the prompts and tokens the model reads "
                     "are below.")
        return "\n".join(lines)
    head = (f"{'protocol':12} {'mode':9} {'responses':>9} {'in store':>9} {'calls':>8} "
            f"{'input tok':>11} {'output tok':>11} {'cost USD':>10}")
    lines += [head, "-" * len(head)]
    for r in rows:
        mark = "*" if r.selected else " "
        cost = "unknown" if r.cost_usd is None else f"{r.cost_usd:.4f}"
        lines.append(f"{r.protocol:12} {r.repeat_mode + mark:9} {r.responses:>9} {r.in_store:>9} "
                     f"{r.calls:>8} {r.input_tokens:>11} {r.output_tokens:>11} {cost:>10}")
    lines.append("* = the repeat mode this run uses. calls: requests still to send (the store "
                 "answers the rest); output tok and cost: at most (max_tokens per completion).")
    if rows:
        lines.append(f"input tokens: {rows[0].tokens}")
    lines.append("prices: " + (f"{price.source}: ${price.input_per_token * 1e6:.4g} / "
                               f"${price.output_per_token * 1e6:.4g} per million input / output "
                               f"tokens" if price else "none in litellm's local cost map for this "
                               "model (cost unknown)"))
    return "\n".join(lines)
