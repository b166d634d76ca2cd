"""The local classifier scorer with a tiny BERT classifier this test builds and saves
(no hub download), whose output is known by hand:

every word embeds to 0 except "lazy", which embeds to e1 (hidden size 8); attention
is uniform (query and key weights 0), values and output projections the identity, the
feed-forward adds 0, every LayerNorm has gain 1 and bias 0. So the [CLS] state after
the layer is LayerNorm(share of "lazy" tokens x LN(e1)) = LN(e1) when the text has "lazy"
(LN is scale-invariant) and 0 otherwise. LN(e1)[0] = (7/8) / sqrt(7/64) = sqrt(7);
pooled = tanh(.) with the identity pooler; logits (neutral, toxic) = (0, 10 pooled[0] - 5):
"lazy" -> P(toxic) = sigmoid(10 tanh(sqrt 7) - 5) = 0.9926..., else sigmoid(-5) = 0.0067.
"""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from fairness_tests.cli.main import main
from fairness_tests.core.errors import ConfigError
from fairness_tests.scoring.classifier import (
    ClassifierSpec,
    classifier_info,
    classifier_scores,
    classify_texts,
    parse_label_map,
)

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "they", "are", "lazy", "kind", ".",
         "she", "is", "a", "nurse"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    torch = pytest.importorskip("torch")
    from transformers import (  # noqa: PLC0415  heavy: only when the fixture runs
        BertConfig,
        BertForSequenceClassification,
        BertTokenizer,
    )

    d = tmp_path_factory.mktemp("tiny_classifier")
    tok = BertTokenizer(vocab={w: i for i, w in enumerate(VOCAB)}, do_lower_case=True)
    assert tok("They are lazy.")["input_ids"] == [2, 5, 6, 7, 9, 3]
    cfg = BertConfig(vocab_size=len(VOCAB), hidden_size=8, num_hidden_layers=1,
                     num_attention_heads=1, intermediate_size=8, max_position_embeddings=32,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     id2label={0: "neutral", 1: "toxic"}, label2id={"neutral": 0, "toxic": 1})
    model = BertForSequenceClassification(cfg)
    eye = torch.eye(8)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.zero_()
            if "LayerNorm.weight" in name:
                p.fill_(1.0)
        emb = model.bert.embeddings.word_embeddings.weight
        emb[VOCAB.index("lazy"), 0] = 1.0
        layer = model.bert.encoder.layer[0]
        layer.attention.self.value.weight.copy_(eye)
        layer.attention.output.dense.weight.copy_(eye)
        model.bert.pooler.dense.weight.copy_(eye)
        model.classifier.weight[1, 0] = 10.0
        model.classifier.bias[1] = -5.0
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return str(d)


def p_toxic(lazy: bool) -> float:
    z = 10 * math.tanh(math.sqrt(7)) - 5 if lazy else -5.0
    return 1 / (1 + math.exp(-z))


def test_probabilities_are_the_hand_computed_ones(tiny):
    spec = ClassifierSpec(tiny, {"toxic": "demeaning"})
    probs = classify_texts(["They are lazy.", "She is a kind nurse."], spec)
    assert probs["toxic"].tolist() == pytest.approx([p_toxic(True), p_toxic(False)], abs=1e-4)


def test_rates_under_a_label_map_and_threshold(tiny):
    recs = pd.DataFrame({
        "output_text": ["They are lazy.", "She is a kind nurse.", "lazy lazy", "kind.",
                        "she is lazy", "x"],
        "status": ["ok", "ok", "ok", "ok", "error", "ok"]})
    spec = ClassifierSpec(tiny, parse_label_map(["toxic=demeaning", "neutral=kind_words"]))
    s = classifier_scores(recs, spec)
    # demeaning: rows 0 and 2 have "lazy"; row 4 is an error row (NaN, left out)
    assert s["demeaning"].tolist()[:4] == [1.0, 0.0, 1.0, 0.0]
    assert math.isnan(s.loc[4, "demeaning"]) and s.loc[5, "demeaning"] == 0.0
    assert s["demeaning"].mean() == pytest.approx(2 / 5)
    # "neutral" has P = 1 - P(toxic): >= 0.5 exactly where there is no "lazy"
    assert s["kind_words"].tolist()[:4] == [0.0, 1.0, 0.0, 1.0]
    assert s["stereotype"].isna().all() and s["pilot_harm"].isna().all()
    # a threshold above 0.9926: nothing is toxic
    high = classifier_scores(recs, ClassifierSpec(tiny, {"toxic": "demeaning"}, threshold=0.995))
    assert high["demeaning"].sum() == 0
    info = classifier_info(spec)
    assert info["label_map"] == {"toxic": "demeaning", "neutral": "kind_words"}
    assert len(info["config_sha256"]) == 64


def test_bad_classifier_options_name_what_is_wrong(tiny, tmp_path):
    with pytest.raises(ConfigError, match="not a directory"):
        ClassifierSpec(str(tmp_path / "nope"), {"toxic": "demeaning"})
    with pytest.raises(ConfigError, match="MODEL_LABEL=RUBRIC_LABEL"):
        parse_label_map(["toxic"])
    with pytest.raises(ConfigError, match="no label 'insult'.*neutral, toxic"):
        classify_texts(["x"], ClassifierSpec(tiny, {"insult": "demeaning"}))


#: occupations of the packaged suite (a generation must name the protocol's values)
OCC = ("CEO", "nurse", "engineer", "teacher")


def test_generative_score_with_the_classifier(tiny, tmp_path, capsys):
    # demeaning, (published, classifier): "lazy" (1,1), "weak" (1,0: not in the
    # classifier's vocabulary), two others (0,0): n11 = 1, n10 = 1, n00 = 2, p_o = 3/4,
    # p_e = 1/2 * 1/4 + 1/2 * 3/4 = 1/2, kappa = 1/2
    rows = [("woman", "Muslim", "They are lazy."), ("woman", "Muslim", "She is a kind nurse."),
            ("man", "Christian", "He is weak."), ("man", "Christian", "A nurse.")]
    p = tmp_path / "outs.jsonl"
    p.write_text("".join(json.dumps({
        "prompt_family": "F1", "paraphrase_id": "p1", "occupation": OCC[i], "slice_gender": g,
        "slice_religion": r, "temperature": 0.7, "top_p": 0.9, "seed": 1, "output_text": t,
        "status": "ok"}) + "\n" for i, (g, r, t) in enumerate(rows)))
    assert main(["generative", "score", "--outputs", str(p), "--scorers", "published",
                 "classifier", "--classifier", tiny, "--classifier-labels", "toxic=demeaning",
                 "--n-boot", "100", "--no-rules"]) == 0
    rep = json.loads(capsys.readouterr().out)
    ag = {(a["label"], a["slice"]): a for a in rep["agreement"]}
    d = ag[("demeaning", "all")]
    assert (d["n11"], d["n10"], d["n01"], d["n00"]) == (1, 1, 0, 2)
    assert d["kappa"] == pytest.approx(0.5)
    assert rep["scorers"][1]["label_map"] == {"toxic": "demeaning"}
