"""How an API backend turns a request's messages into what the model reads.

The local backend (:mod:`.backends.transformers_backend`) renders the turns with the
model's chat template (or Gemma's turn format, or ``role: content`` lines) and ends a
multiple-choice prompt with the answer prefix ``"Answer: ("``, so the next token is
the answer letter. The same prompt is available to API models:

``chat``
    the messages as given. A chat endpoint (``openai/...``) renders them with the
    server's own template; a completion endpoint (``text-completion-openai/...``)
    gets their contents joined by a blank line (what this backend always sent). No
    answer prefix, no stop sequence. The default for chat endpoints, and the meaning
    of a request without a ``prompt_format`` (its key is the one it always had).
``chat-prefill``
    chat endpoints whose provider continues a final assistant turn (litellm's
    ``supports_assistant_prefill``, e.g. ``anthropic/``): the messages, then an
    assistant turn holding the answer prefix (multiple-choice requests only).
``completion-gemma``
    completion endpoints: Gemma's turn format
    (:func:`format_gemma`: ``<start_of_turn>user ...``, the model
    turn opened), then the answer prefix for a multiple-choice request. Exactly the
    text the local backend feeds a Gemma model.
``completion-plain``
    completion endpoints: ``role: content`` lines, then ``assistant: `` and the answer
    prefix (the local backend's format for a model without a template).
``auto`` (the default)
    ``chat`` for a chat endpoint; for a completion endpoint ``completion-gemma`` when
    the model id names Gemma, else ``completion-plain``. Resolved from the model id
    alone (no server is asked: a replayed run resolves it the same way). None of the
    OpenAI-compatible servers checked exposes its chat template through the API
    (``transformers serve`` 5.x: no; ``llama-cpp-python`` 0.3.x: no; vLLM: no), so
    the server's template cannot be the default.

With an answer prefix a multiple-choice request is sent with ``stop`` = ``[")",
"\\n"]`` (``["\\n"]`` when the prefix does not end with ``"("``; ``chat-prefill``
sends only ``")"``, as some providers refuse a whitespace stop sequence), and the reply
is cut at the first of ``")"`` / newline here too, so a server that ignores ``stop``
gives the same answer text (the letter alone).

The key (:meth:`Request.key`) of a ``litellm`` request carries the *concrete* format
it is sent in when that is not ``chat``, and the answer prefix when one is used and it
is not :data:`DEFAULT_ANSWER_PREFIX` (:func:`request_key_fields`): a chat request's key
is unchanged; a ``text-completion-*`` request's key names its format even when the
request leaves it at ``auto`` (``None``), so an answer asked before the formats existed
(the contents joined) is never served for it, and every caller computes the same key
without knowing the backend's options. A backend option other than the default is put
into the requests by the runner (:func:`~fairness_tests.models.asking.runner.stamp_requests`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Literal, Sequence, get_args

from fairness_tests.core.errors import ConfigError

PromptFormat = Literal["auto", "chat", "chat-prefill", "completion-gemma", "completion-plain"]
PROMPT_FORMATS: tuple[str, ...] = get_args(PromptFormat)
DEFAULT_PROMPT_FORMAT: PromptFormat = "auto"
DEFAULT_ANSWER_PREFIX = "Answer: ("
COMPLETION_FORMATS = ("completion-gemma", "completion-plain")
ANSWER_STOP = (")", "\n")
#: the request kinds rendered as a prompt (:func:`render`)
PROMPT_KINDS = ("choice", "generate")


@dataclass(frozen=True)
class Message:
    """One turn of a request's conversation: ``role`` (``system``, ``user``,
    ``assistant``) and its ``content``."""
    role: str
    content: str


def is_completion_model(model: str) -> bool:
    """A litellm model string for a ``/v1/completions`` endpoint (``text-completion-*/``)."""
    return model.startswith("text-completion")


def check_format(value: object, option: str = "prompt_format") -> str:
    """``value`` when it is one of :data:`PROMPT_FORMATS`, else a :class:`ConfigError`
    naming ``option``."""
    if value not in PROMPT_FORMATS:
        raise ConfigError(f"{option} must be one of {', '.join(PROMPT_FORMATS)}, got {value!r}",
                          key=option)
    return str(value)


def check_prefix(value: object, option: str = "answer_prefix") -> str:
    """``value`` when it is a non-empty string, else a :class:`ConfigError` naming ``option``."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{option} must be a non-empty string, got {value!r}", key=option)
    return value


def resolve(fmt: str, model: str) -> str:
    """The concrete format ``fmt`` means for ``model`` (``auto`` resolved; see the module
    docstring). A completion format for a chat model, or ``chat-prefill`` for a
    completion model, is a :class:`ConfigError` naming ``prompt_format``."""
    check_format(fmt)
    completion = is_completion_model(model)
    if fmt == "auto":
        if not completion:
            return "chat"
        return "completion-gemma" if "gemma" in model.lower() else "completion-plain"
    if fmt in COMPLETION_FORMATS and not completion:
        raise ConfigError(f"prompt_format {fmt!r} renders a prompt for a completion endpoint; "
                          f"{model!r} is a chat model (use text-completion-openai/<model>, or "
                          f"prompt_format chat / chat-prefill)", key="prompt_format")
    if fmt == "chat-prefill" and completion:
        raise ConfigError(f"prompt_format 'chat-prefill' needs a chat endpoint; {model!r} is a "
                          f"completion model (use completion-gemma or completion-plain)",
                          key="prompt_format")
    return fmt


def uses_prefix(fmt: str, kind: str) -> bool:
    """Whether a request of ``kind`` in the concrete format ``fmt`` ends with the answer
    prefix (multiple-choice requests in every format but ``chat``)."""
    return kind == "choice" and fmt != "chat"


def key_fields(fmt: str, answer_prefix: str, kind: str) -> dict[str, str | None]:
    """``{prompt_format, answer_prefix}`` as a request carries them in its key: the
    concrete format unless it is ``chat``; the prefix only where it is used and differs
    from :data:`DEFAULT_ANSWER_PREFIX`."""
    return {"prompt_format": None if fmt == "chat" else fmt,
            "answer_prefix": answer_prefix if (uses_prefix(fmt, kind)
                                               and answer_prefix != DEFAULT_ANSWER_PREFIX)
            else None}


def request_key_fields(req: Any) -> dict[str, str | None]:
    """``{prompt_format, answer_prefix}`` as ``req``'s key holds them: for a ``litellm``
    request the concrete format (``auto`` / ``None`` resolved from its model) and the
    prefix through :func:`key_fields`; for another backend the fields as set."""
    if req.backend != "litellm":
        return {"prompt_format": req.prompt_format, "answer_prefix": req.answer_prefix}
    fmt = resolve(req.prompt_format or DEFAULT_PROMPT_FORMAT, req.model)
    return key_fields(fmt, req.answer_prefix or DEFAULT_ANSWER_PREFIX, req.kind)


def stop_sequences(fmt: str, answer_prefix: str, kind: str) -> list[str] | None:
    """Where a prefixed answer ends (None: no prefix, no stop): after an answer prefix
    ending in ``"("`` the letter is closed by ``")"``; a newline ends every prefixed
    answer. The reply is cut there (:func:`cut_at_stop`)."""
    if not uses_prefix(fmt, kind):
        return None
    return list(ANSWER_STOP) if answer_prefix.endswith("(") else ["\n"]


def sent_stop(fmt: str, answer_prefix: str, kind: str) -> list[str] | None:
    """The ``stop`` sent to the server: :func:`stop_sequences`, without whitespace-only
    strings for ``chat-prefill`` (a provider such as Anthropic refuses them); None when
    nothing is left."""
    stop = stop_sequences(fmt, answer_prefix, kind)
    if stop and fmt == "chat-prefill":
        stop = [x for x in stop if x.strip()]
    return stop or None


def cut_at_stop(text: str, stop: Sequence[str] | None) -> str:
    """``text`` up to (without) the first occurrence of any ``stop`` string."""
    if not stop or not text:
        return text
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return text if cut < 0 else text[:cut]


@dataclass(frozen=True)
class Rendered:
    """What is sent: ``prompt`` (completion endpoints) or ``messages`` (chat) and the
    ``stop`` sequences; where the reply is ``cut`` (:func:`stop_sequences`); whether the
    prompt ends with an open bracket (the next token is then the bare answer letter)."""
    prompt: str | None
    messages: list[dict[str, str]] | None
    stop: list[str] | None
    cut: list[str] | None
    after_open_bracket: bool


def format_gemma(messages: Iterable[Any], add_generation_prompt: bool = True) -> str:
    """Gemma turn format, without the BOS token (the tokenizer adds it).

    ``messages`` are :class:`Message` objects or
    ``(role, content)`` pairs. A leading system message is folded into the first
    user turn (``system + "\\n\\n" + user``); ``assistant`` becomes ``model``.
    """
    msgs = [(m.role, m.content) if hasattr(m, "role") else (m[0], m[1]) for m in messages]
    if not msgs:
        raise ConfigError("no messages to format")
    prefix = ""
    if msgs[0][0] == "system":
        prefix = msgs[0][1] + "\n\n"
        msgs = msgs[1:]
    if not msgs:
        raise ConfigError("a system message needs a user message after it")
    out = []
    for i, (role, content) in enumerate(msgs):
        role = "model" if role == "assistant" else role
        head = prefix if i == 0 else ""
        out.append(f"<start_of_turn>{role}\n{head}{content.strip()}<end_of_turn>\n")
    if add_generation_prompt:
        out.append("<start_of_turn>model\n")
    return "".join(out)


def render(messages: Iterable[Message], fmt: str, answer_prefix: str, kind: str,
           completion: bool) -> Rendered:
    """The request's messages in the concrete format ``fmt`` (see the module docstring).
    Only ``choice`` and ``generate`` requests are prompts: another kind (a
    ``loglikelihood`` request, scored by the backend itself) is a :class:`ConfigError`."""
    if kind not in PROMPT_KINDS:
        raise ConfigError(f"a {kind} request is not sent as a chat or completion prompt "
                          f"(the litellm backend scores it itself through /v1/completions; "
                          f"a provider batch job cannot)", key="kind")
    msgs = list(messages)
    prefixed = uses_prefix(fmt, kind)
    cut = stop_sequences(fmt, answer_prefix, kind)
    stop = sent_stop(fmt, answer_prefix, kind)
    after_open = prefixed and answer_prefix.endswith("(")
    if completion:
        if fmt == "chat":
            text = "\n\n".join(m.content for m in msgs)
        elif fmt == "completion-gemma":
            text = format_gemma(msgs, add_generation_prompt=True)
        elif fmt == "completion-plain":
            text = "".join(f"{m.role}: {m.content.strip()}\n" for m in msgs) + "assistant: "
        else:
            raise ConfigError(f"prompt_format {fmt!r} is not a completion format",
                              key="prompt_format")
        return Rendered(text + (answer_prefix if prefixed else ""), None, stop, cut, after_open)
    out = [{"role": m.role, "content": m.content} for m in msgs]
    if fmt == "chat-prefill" and prefixed:
        out.append({"role": "assistant", "content": answer_prefix})
    elif fmt != "chat" and fmt != "chat-prefill":
        raise ConfigError(f"prompt_format {fmt!r} is not a chat format", key="prompt_format")
    return Rendered(None, out, stop, cut, after_open)
