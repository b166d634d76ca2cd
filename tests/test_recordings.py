"""The committed recordings of the embedded model: the manifest is honest about what
they hold, and they hold exactly what the recorded settings ask (so replay is complete).

Expected counts follow from the protocol definitions, not from the files:
- BBQ: 2,880 + 5,232 = 8,112 items (intersectional filter), one answer each;
- consistency: 448 items x 20 repeats, repeat 0 shared with the audit -> 448 x 19 more;
- rotations on the consistency sample: 448 x 2 more;
- generative grid: 4 families x 5 paraphrases x 4 occupations x 4 slices x 2 decoding
  regimes x 5 seeds = 3,200;
- probe: 2 name orders x 5 paraphrases x 3 contexts x 2 decodings x 5 seeds = 300.
"""
from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest
import yaml

from fairness_tests.core.errors import ConfigError
from fairness_tests.pipeline.configure import audit_config
from fairness_tests.pipeline.recordings import MANIFEST, recording_settings

REC = MANIFEST.parent


@pytest.fixture(scope="module")
def manifest():
    return yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def records(manifest):
    entry = manifest["recordings"][0]
    rows = []
    for name in entry["files"]:
        with gzip.open(REC / name, "rt", encoding="utf-8") as fh:
            rows += [json.loads(line) for line in fh]
    return rows


def test_manifest_settings_drive_replay(manifest):
    entry = manifest["recordings"][0]
    assert entry["model"] == "embedded:gemma-3-270m"
    cfg = audit_config()
    assert cfg.gen_seeds is None and cfg.gen_max_new_tokens == 96
    assert set(cfg.benchmarks) == {"bbq", "consistency", "generative", "probe"}
    # an explicit option wins over the recorded settings
    assert audit_config(gen_max_new_tokens=160).gen_max_new_tokens == 160
    assert recording_settings("some/other-model") == {}


def test_bad_manifest_names_the_file_and_key(tmp_path):
    bad = tmp_path / "manifest.yaml"
    bad.write_text("recordings:\n  - model: m\n    settings: {gen_seedz: [1]}\n")
    with pytest.raises(ConfigError, match=r"manifest.yaml.*recordings\[0\]\.settings.*gen_seedz"):
        recording_settings("m", bad)


def test_recordings_hold_exactly_the_recorded_protocols(records):
    kinds = Counter(r["request"]["kind"] for r in records)
    assert kinds["choice"] == 8112 + 448 * 19 + 448 * 2
    protocols = Counter(r["meta"].get("protocol", "probe" if "name_order" in r["meta"]
                                      else "generative") for r in records
                        if r["request"]["kind"] == "generate")
    assert protocols["generative"] == 3200 and protocols["probe"] == 300
    gen = [r for r in records if r["request"]["kind"] == "generate"]
    assert {r["request"]["seed"] for r in gen} == {1, 2, 3, 4, 5}
    assert max(r["request"]["decoding"]["max_tokens"] for r in gen) == 96
    assert all(r["request"]["model"] == "embedded:gemma-3-270m" for r in records)


def test_recordings_carry_no_secret_and_only_known_statuses(records):
    statuses = Counter(r["response"]["status"] for r in records)
    assert set(statuses) <= {"ok", "error", "refused"}
    blob = json.dumps(records[:2000])
    for needle in ("api_key", "Authorization", "Bearer ", "sk-"):
        assert needle not in blob


def test_choice_rows_keep_the_letter_distribution(records):
    choice = [r["response"] for r in records if r["request"]["kind"] == "choice"]
    for resp in choice[:500]:
        p = resp["letter_probs"]
        assert len(p) == 3 and abs(sum(p) - 1.0) < 1e-6
        assert resp["answer"] in (0, 1, 2) and resp["text"] == "abc"[resp["answer"]]
