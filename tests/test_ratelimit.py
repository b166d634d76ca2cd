"""The shared rate limiter's arithmetic (GCRA without burst), on paper:
rpm 60 -> starts 1 s apart; tpm 600 and 30 tokens -> the next start 3 s later;
two limiters on one state file share the spacing; a start woken late takes a new slot."""
from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from fairness_tests.core.errors import ConfigError
from fairness_tests.models.backends.ratelimit import RateLimiter, estimate_tokens


def test_request_spacing_is_60_over_rpm():
    lim = RateLimiter(rpm=60)
    t0 = time.time()
    starts = [lim.reserve() for _ in range(4)]
    assert starts[0] == pytest.approx(t0, abs=0.05)
    assert [b - a for a, b in itertools.pairwise(starts)] == pytest.approx([1.0, 1.0, 1.0])


def test_token_spacing_and_settlement():
    lim = RateLimiter(tpm=600)                   # 10 tokens per second
    a = lim.reserve(30)                          # 30 tokens occupy 3 s
    b = lim.reserve(5)
    assert b - a == pytest.approx(3.0)
    lim.settle(5, 25)                            # b used 20 more: 2 s more
    c = lim.reserve(0)
    assert c - b == pytest.approx(0.5 + 2.0)
    both = RateLimiter(rpm=60, tpm=600)          # the stricter of the two decides
    x, y, z = both.reserve(50), both.reserve(0), both.reserve(0)
    assert (y - x, z - y) == pytest.approx((5.0, 1.0))


def test_limiters_on_one_file_share_the_spacing(tmp_path):
    a = RateLimiter(rpm=120, path=tmp_path / "s.limits")
    b = RateLimiter(rpm=120, path=tmp_path / "s.limits")
    starts = sorted([a.reserve(), b.reserve(), a.reserve(), b.reserve()])
    assert [y - x for x, y in itertools.pairwise(starts)] == pytest.approx([0.5] * 3, abs=0.01)
    other_scope = b.reserve(scope="another/model")
    assert other_scope < starts[-1]              # scopes (models) are limited apart


def test_a_start_woken_late_takes_a_new_slot():
    lim = RateLimiter(rpm=600)                   # 0.1 s apart, slack 25 ms

    async def run():
        sent = []

        async def one():
            await lim.wait()
            sent.append(time.time())

        async def hog():                         # blocks the event loop for 0.35 s
            await asyncio.sleep(0)
            time.sleep(0.35)
        await asyncio.gather(hog(), *(one() for _ in range(4)))
        return sorted(sent)
    sent = asyncio.run(run())
    assert lim.late >= 2
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    assert min(gaps) >= 0.1 - lim.slack_s - 0.01, gaps


def test_estimate_and_bad_caps():
    assert estimate_tokens(0, 16) == 16 and estimate_tokens(9, 1) == 3 + 1
    with pytest.raises(ConfigError, match="rpm must be a positive number"):
        RateLimiter(rpm=-5)
