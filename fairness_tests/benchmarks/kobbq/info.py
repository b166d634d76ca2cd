"""What a KoBBQ run records under run.json's ``kobbq`` key (light: no pandas)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class KoBBQInfo:
    """What a card discloses about a KoBBQ run: the data (authors' repository @ commit,
    where it was read, sha256 and release status per file), the prompt (id, text, the
    unknown expression, the answer prefix), how an answer is read, the counts, the
    intervals' settings, the subset asked (empty: the whole test split), what the card's
    run notes say about the protocol (``notes``: the prompt asked) and the authors'
    warnings."""
    source: str = ""
    data_dir: str = ""
    sha256: dict[str, str] = field(default_factory=dict)
    release: dict[str, str] = field(default_factory=dict)
    prompt_id: int = 1
    prompt: str = ""
    unknown: str = ""
    answer_prefix: str = ""
    answer_rule: str = ("the most probable answer letter (the authors decode greedily); "
                        "a text reply mapped by the authors' raw2prediction")
    orders: str = "the three circulant option orders of the authors' 1_preprocess.py"
    n_samples: int = 0
    n_answers: int = 0
    n_failed: int = 0
    #: mean probability the model puts on the three answer letters (full vocabulary)
    mean_letter_mass: float | None = None
    limit: int | None = None
    cluster: str = "template"
    n_boot: int = 0
    seed: int = 0
    subset: str = ""
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: the distinct prompts asked (None: not asked by this run, or not recorded)
    n_prompts: int | None = None
    #: the decoding of the requests (the letters' softmax temperature; None: not asked)
    temperature: float | None = None
    top_p: float | None = None
