"""Issue 27 on the card: how the run asked. Per protocol the requests sent, answered from
the store, failed and invalid; the first error; an "incomplete" banner when requests
failed; the share of prompts below the letter-mass floor (a run low everywhere says
so); a cost without a price shown as "unknown", never $0.0000 or dropped.

The counts are the run metadata's ``asking.counts`` (protocol -> AskCounts), hand-built
here as the audit records them; a run recorded before they existed shows none of it.
The figures (160 BBQ requests, 74 failed after the server went down; 448 consistency
prompts, 197 with no letter in the top logprobs) are the issue's own.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from card_testdata import USER, make_run  # noqa: E402

from fairness_tests.card.fill import fill_card  # noqa: E402
from fairness_tests.card.render_html import render_html  # noqa: E402
from fairness_tests.card.render_md import render_markdown  # noqa: E402
from fairness_tests.card.schema import validate_card  # noqa: E402
from fairness_tests.models.asking.runner import AskCounts  # noqa: E402
from fairness_tests.run.metadata import AskingInfo  # noqa: E402

ERROR = "litellm.APIConnectionError: Connection refused (127.0.0.1:8080)"
MODE = {"requested": "logprobs", "used": "logprobs", "fallback": None,
        "shared_forward_pass": True}


def _run(counts=None, usage=None):
    run = make_run("bbq")
    asking = AskingInfo(repeat_mode=dict(MODE), max_tokens=16, usage=usage)
    if counts is not None:
        asking.counts = counts          # the field the audit records (run metadata asking)
    run.metadata.asking = asking
    run.metadata.mode = "live"
    return run


def _bbq_down() -> AskCounts:
    # 160 distinct requests, all sent; 86 answered, 74 failed after retries
    return AskCounts(label="bbq", requests=160, sent=160, from_store=0, failed=74,
                     first_error=ERROR, invalid=3)


def _consistency(low: int) -> dict:
    # the form run.json holds (AskCounts.to_dict): 448 prompts x 20 repeats from the store
    return {"label": "consistency", "requests": 8960, "sent": 0, "from_store": 8960,
            "failed": 0, "first_error": None, "refused": 0, "truncated": 0, "invalid": 3940,
            "letter_prompts": 448, "low_mass_prompts": low, "low_mass_share": low / 448}


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html.replace("<wbr>", "")))


def test_failed_requests_make_an_incomplete_banner_and_a_requests_table():
    card = fill_card(_run({"bbq": _bbq_down(), "consistency": _consistency(197)}), USER)
    a = card["evaluation_protocol"]["asking"]
    # 74 failed of 160 + 8960 requests
    assert a["incomplete"] == {"failed": 74, "requests": 9120, "first_error": ERROR}
    assert [r["protocol"] for r in a["requests"]] == ["bbq", "consistency"]
    assert (a["requests"][0]["sent"], a["requests"][1]["from_store"]) == (160, 8960)
    assert validate_card(card).errors == []
    html = render_html(card)
    text = _text(html)
    alert = re.search(r'<p class="alert">([^<]*)</p>', html).group(1)
    assert alert.startswith("INCOMPLETE RUN: 74 of 9120 requests failed after their retries "
                            "(bbq 74); first error: litellm.APIConnectionError")
    # before any verdict: the banner comes before section 1
    assert html.index('class="alert"') < html.index('id="identification"')
    # the table: protocol, requests, sent, from store, failed, invalid, refused, truncated,
    # letter mass below floor
    assert "bbq 160 160 0 74 3 0 0" in text
    assert "consistency 8960 0 8960 0 3940 0 0 197 of 448 prompts" in text
    assert "First error bbq: " in text
    assert f"bbq: {ERROR}" in text
    md = render_markdown(card)
    assert "> **INCOMPLETE RUN: 74 of 9120 requests failed" in md
    assert "| bbq | 160 | 160 | 0 | 74 | 3 | 0 | 0 |  |" in md


def test_letter_mass_share_and_a_run_low_everywhere():
    # 197 of 448 = 0.4397 -> "44%"
    card = fill_card(_run({"consistency": _consistency(197)}), USER)
    lm = card["evaluation_protocol"]["asking"]["letter_mass"]
    assert (lm["prompts"], lm["below"], lm["floor"], lm["everywhere"]) == (448, 197, 0.5, False)
    assert lm["statement"].startswith("197 of 448 prompt(s) asked for letter probabilities "
                                      "(44%) had a letter mass below 0.5")
    assert "INCOMPLETE" not in render_html(card) and "LOW EVERYWHERE" not in render_html(card)
    low = fill_card(_run({"consistency": _consistency(448)}), USER)
    html = render_html(low)
    assert low["evaluation_protocol"]["asking"]["letter_mass"]["everywhere"] is True
    banner = re.search(r'<p class="alert">([^<]*)</p>', html).group(1)
    assert banner.startswith("LETTER MASS LOW EVERYWHERE: all 448 prompt(s) asked for "
                             "letter probabilities (100%) had a letter mass below 0.5")
    assert validate_card(low).errors == []


def test_unknown_cost_is_unknown_never_zero():
    usage = {"attempts": 120, "retries": 0, "prompt_tokens": 9000, "completion_tokens": 480,
             "cost_usd": None, "cost_known_usd": 0.0, "cost_unknown_calls": 120, "calls": 120}
    card = fill_card(_run({"bbq": AskCounts(label="bbq", requests=120, sent=120)}, usage), USER)
    a = card["evaluation_protocol"]["asking"]
    assert a["cost_usd"] == "unknown"
    assert "cost unknown (120 call(s) without a price)" in a["statement"]
    html = render_html(card)
    assert "<dt>Cost</dt><dd>unknown</dd>" in html
    assert "0.0000" not in html and "cost_usd 0" not in html
    assert validate_card(card).errors == []
    priced = dict(usage, cost_usd=0.0123, cost_known_usd=0.0123, cost_unknown_calls=0)
    a2 = fill_card(_run(None, priced), USER)["evaluation_protocol"]["asking"]
    assert a2["cost_usd"] == 0.0123 and "cost 0.0123 USD" in a2["statement"]


def test_a_run_without_counts_shows_no_requests_and_no_banner():
    card = fill_card(_run(), USER)
    a = card["evaluation_protocol"]["asking"]
    assert not {"requests", "incomplete", "letter_mass", "cost_usd"} & set(a)
    html = render_html(card)
    assert 'class="alert"' not in html and 'id="requests"' not in html
    complete = fill_card(_run({"bbq": AskCounts(label="bbq", requests=8, sent=2,
                                                from_store=6)}), USER)
    assert "incomplete" not in complete["evaluation_protocol"]["asking"]
    assert 'class="alert"' not in render_html(complete)
