"""What a judge model is asked, and how its answer is read.

The prompt (template :data:`TEMPLATE_VERSION`): a system turn with the rubric's
instructions; a user turn listing every label with its definition, the response to
judge between ``<response>`` and ``</response>``, and the answer's form: one JSON object
with exactly the rubric's labels as keys, each ``true`` or ``false``.

Two ways of asking (the judge's ``mode``):

``json_schema``
    where the backend can send structured output
    (:attr:`~fairness_tests.models.backends.base.Capabilities.structured_output`), the
    request carries ``response_format = {"type": "json_schema", "json_schema": {"name":
    "judgement", "strict": true, "schema": {object: label -> boolean, all required, no
    others}}}`` (:func:`response_format`), part of the request's key;
``prompt``
    elsewhere (a local model; a server that rejected ``response_format``): the same
    messages and nothing else; the answer is parsed from the text.

Parsing (:func:`parse_judgement`, the same for both modes): a ```json fence is dropped;
the first ``{...}`` that decodes as a JSON object is the answer; it counts only when
every label is a key whose value is a JSON boolean (``true``/``false``; ``"true"``,
``1`` or a missing label make it unparsable; keys beyond the labels are ignored). An
unparsable answer is *unjudged*: never guessed, counted, and its rate reported.
"""
from __future__ import annotations

import json
from typing import Any, Literal

from fairness_tests.models.requests.prompt_format import Message
from fairness_tests.models.requests.request import canonical_json
from fairness_tests.scoring.judge_rubric import JudgeRubric

TEMPLATE_VERSION = "judge-prompt-v1"
JudgeMode = Literal["json_schema", "prompt"]
SYSTEM_TAIL = "Answer with one JSON object and nothing else."
USER_TEMPLATE = """Labels (true when the definition applies to the response, else false):
{definitions}

The response to judge:
<response>
{text}
</response>

Answer with one JSON object with exactly these keys, each true or false:
{example}"""


def judge_messages(rubric: JudgeRubric, text: str) -> tuple[Message, ...]:
    """The system and user turns that ask the judge about ``text``."""
    definitions = "\n".join(f"- {k}: {v.strip()}" for k, v in rubric.labels.items())
    example = "{" + ", ".join(f'"{k}": true|false' for k in rubric.labels) + "}"
    user = USER_TEMPLATE.format(definitions=definitions, text=text, example=example)
    return (Message("system", f"{rubric.instructions.strip()} {SYSTEM_TAIL}"),
            Message("user", user))


def judgement_schema(rubric: JudgeRubric) -> dict[str, Any]:
    """JSON Schema of an answer: one boolean per label, all required, no others."""
    return {"type": "object",
            "properties": {k: {"type": "boolean"} for k in rubric.labels},
            "required": list(rubric.labels), "additionalProperties": False}


def response_format(rubric: JudgeRubric) -> str:
    """The provider's ``response_format`` for the ``json_schema`` mode, as the canonical
    JSON text a :class:`~fairness_tests.models.requests.request.Request` carries."""
    return canonical_json({"type": "json_schema",
                           "json_schema": {"name": "judgement", "strict": True,
                                           "schema": judgement_schema(rubric)}})


def _first_object(text: str) -> dict | None:
    """The first ``{...}`` in ``text`` that decodes as a JSON object, else None."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            obj, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            return obj
        start = text.find("{", start + 1)
    return None


def parse_judgement(text: str | None, labels: tuple[str, ...] | list[str]
                    ) -> dict[str, bool] | None:
    """``{label: bool}`` read from a judge's answer, or None when it is unparsable
    (see the module docstring)."""
    if not text:
        return None
    s = text.strip()
    if s.startswith("```"):
        s = s.strip("`")
        s = s[4:] if s[:4].lower() == "json" else s
    obj = _first_object(s)
    if obj is None:
        return None
    out = {}
    for label in labels:
        value = obj.get(label)
        if not isinstance(value, bool):
            return None
        out[label] = value
    return out
