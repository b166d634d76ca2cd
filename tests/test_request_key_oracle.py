"""The request key's one-pass canonical form equals the reference definition (issue 24).

The reference below is the first, plain implementation of ``canonical`` (a recursive
walk that tests every value with ``isinstance`` and builds the error's place eagerly),
kept here only, as the oracle: the package's faster form must give the same data, the
same JSON, the same key and the same error text for every input."""
from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import asdict
from typing import Any

import numpy as np
import pytest

from fairness_tests.core.errors import ConfigError
from fairness_tests.models.requests.prompt_format import Message
from fairness_tests.models.requests.request import (
    Decoding,
    Request,
    _plain_canonical,
    canonical,
    canonical_json,
    chat,
)


def ref_canonical(value: Any, where: str = "request") -> Any:
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ConfigError(f"{where}: non-string key {k!r}")
            if v is not None:
                out[k] = ref_canonical(v, f"{where}.{k}")
        return out
    if isinstance(value, (list, tuple)):
        return [ref_canonical(v, f"{where}[{i}]") for i, v in enumerate(value)]
    number = ref_number(value, where)
    if number is not None:
        return number
    raise ConfigError(f"{where}: {type(value).__name__} {value!r} cannot be part of a request key")


def ref_number(value: Any, where: str) -> int | float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        x = value
    elif type(value).__module__ == "numpy" and hasattr(value, "dtype"):
        kind = value.dtype.kind
        if kind in "iu":
            return int(value)
        if kind != "f":
            return None
        x = float(str(value))
    else:
        return None
    if not math.isfinite(x):
        raise ConfigError(f"{where}: {x} is not a finite number")
    return int(x) if x.is_integer() else x


def ref_key(req: Request) -> str:
    """sha256 of the reference canonical JSON of the request's fields (as first defined:
    the decoding through ``dataclasses.asdict``, reasoning settings only when set)."""
    dec = asdict(req.decoding)
    for name in ("reasoning_effort", "thinking_budget"):
        if dec[name] is None:
            del dec[name]
    fields = {"backend": req.backend, "model": req.model, "kind": req.kind,
              "messages": [[m.role, m.content] for m in req.messages],
              "choices": list(req.choices), "decoding": dec, "seed": req.seed,
              "repeat": req.repeat,
              "repeat_mode": None if req.repeat_mode == "calls" else req.repeat_mode,
              **req._format_fields(), "letter_rule": req.letter_rule}
    blob = json.dumps(ref_canonical(fields), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _value(rng: random.Random, depth: int = 0) -> Any:
    """A random value of the kinds a key can hold (and some it cannot)."""
    kinds = ["str", "int", "float", "bool", "none", "np_int", "np_f32", "np_f64", "ustr"]
    if depth < 3:
        kinds += ["list", "tuple", "dict", "dict"]
    k = rng.choice(kinds)
    if k == "str":
        return rng.choice(["", "a", "Answer: (", "é ü", "line\nbreak"])
    if k == "ustr":
        return np.str_("numpy str")
    if k == "int":
        return rng.randint(-5, 10**6)
    if k == "float":
        return rng.choice([0.0, 1.0, 0.7, -2.5, 1e-7, 3.0, 1e300])
    if k == "bool":
        return rng.random() < 0.5
    if k == "none":
        return None
    if k == "np_int":
        return np.int64(rng.randint(0, 99))
    if k == "np_f32":
        return np.float32(rng.choice([0.7, 1.0, 0.9]))
    if k == "np_f64":
        return np.float64(rng.choice([0.2, 2.0]))
    items = [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if k == "list":
        return items
    if k == "tuple":
        return tuple(items)
    return {f"k{i}": v for i, v in enumerate(items)}


def test_canonical_equals_the_reference_on_random_values():
    rng = random.Random(24)
    for _ in range(3000):
        v = {"root": _value(rng)}
        assert canonical(v) == ref_canonical(v)
        assert canonical_json(v) == json.dumps(ref_canonical(v), sort_keys=True,
                                               separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("bad", [
    {"a": [1, {"b": float("nan")}]},
    {"a": {"c": (1, 2, {"d": np.float64("inf")})}},
    {"a": [{1: "x"}]},
    {"decoding": {"x": object()}},
    {"a": ["ok", ("t", 1j)]},
])
def test_errors_name_the_same_place(bad):
    with pytest.raises(ConfigError) as ours:
        canonical(bad)
    with pytest.raises(ConfigError) as ref:
        ref_canonical(bad)
    text = str(ref.value)
    assert str(ours.value) == (text if "object at" not in text else str(ours.value))
    assert str(ours.value).split(":")[0] == text.split(":")[0]


def test_request_keys_equal_the_reference_keys():
    reqs = [Request(chat("sys", "q"), Decoding(1, 1, 16), seed=3),
            Request(chat(None, "q"), Decoding(np.float32(0.7), 0.9, np.int64(64)), repeat=5,
                    backend="transformers", model="embedded:gemma-3-270m", kind="choice",
                    choices=("a", "b", "c")),
            Request((Message("user", "x"), Message("assistant", "y")),
                    Decoding(0.2, 0.95, 200, reasoning_effort="low", thinking_budget=1024),
                    backend="litellm", model="openai/gpt-4o-mini", repeat_mode="n",
                    prompt_format="chat-prefill", answer_prefix="Answer:", letter_rule="max"),
            Request(chat(None, "q"), backend="litellm", model="text-completion-openai/x",
                    kind="choice", choices=("a", "b"), repeat_mode="logprobs")]
    for r in reqs:
        assert r.key() == ref_key(r)
        assert r.with_(repeat=1).key() == ref_key(r.with_(repeat=1))


def test_the_plain_fast_path_equals_canonical_and_steps_aside_for_other_types():
    """Request keys take a one-pass path for the plain types requests are built with
    (issue 24); on random key-field dicts it gives what canonical() gives, or None
    (canonical decides) when a value is of another type."""
    rng = random.Random(7)
    plain = other = 0
    for _ in range(3000):
        fields = {"backend": rng.choice(["litellm", "transformers"]),
                  "model": rng.choice(["m", "embedded:gemma-3-270m"]),
                  "kind": "choice",
                  "messages": [["user", f"q{rng.randint(0, 9)}"]],
                  "choices": rng.choice([["a", "b"], []]),
                  "decoding": {"temperature": rng.choice([0.0, 1.0, 0.7, 2.0]),
                               "top_p": rng.choice([1.0, 0.9]), "max_tokens": 16},
                  "seed": rng.randint(0, 5), "repeat": rng.randint(0, 3),
                  "repeat_mode": rng.choice([None, "n"]), "letter_rule": None}
        if rng.random() < 0.3:          # a value of another type somewhere
            where = rng.choice(["seed", "model", "messages", "decoding"])
            odd = rng.choice([True, np.int64(3), np.float32(0.7), ("t",), 1.5])
            if where == "decoding":
                fields["decoding"]["temperature"] = odd
            elif where == "messages":
                fields["messages"] = [("user", "q")]
            else:
                fields[where] = odd
        fast = _plain_canonical(fields)
        if fast is None:
            other += 1
            continue
        plain += 1
        assert fast == canonical(fields) == ref_canonical(fields)
        assert json.dumps(fast, sort_keys=True) == json.dumps(ref_canonical(fields),
                                                              sort_keys=True)
    assert plain > 1500 and other > 300
