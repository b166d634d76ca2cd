"""What every card section reads: the run's typed metadata, its tables and verdicts,
and the list of required facts the run could not supply (they go to the card's
``missing_fields``, never invented)."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from fairness_tests.pipeline.views import CardProtocol
from fairness_tests.rules.evaluate import VERDICT_COLUMNS
from fairness_tests.run.metadata import RunMetadata
from fairness_tests.run.result import RunResult

SOURCE_NOUN = {"predictions": "predictions", "outputs": "generations"}


@dataclass
class RunFacts:
    meta: RunMetadata
    tables: dict[str, pd.DataFrame]
    verdicts: pd.DataFrame
    missing: list[tuple[str, str, str]] = field(default_factory=list)   # (field, section, hint)
    #: the families' protocol statements (:func:`~.protocol.protocol_parts`, once per card)
    protocol: CardProtocol | None = None

    @classmethod
    def of(cls, run: RunResult) -> "RunFacts":
        verdicts = (run.verdicts if run.verdicts is not None
                    else pd.DataFrame(columns=VERDICT_COLUMNS))
        return cls(run.metadata, dict(run.tables), verdicts)

    @property
    def asked(self) -> bool:
        """True when fairness_tests asked the model (the audit: its prompts, its decoding);
        False for a run scored from someone else's predictions or generations."""
        return self.meta.source.kind == "audit"

    def lack(self, path: str, section: str, hint: str) -> None:
        self.missing.append((path, section, hint))

    def scored_from(self) -> str:
        """``someone else's predictions, read from F (sha256 H) by fairness-tests NAME
        score`` (only for a scored run; the command is its regen command's, which names
        the benchmark)."""
        s = self.meta.source
        sha = f" (sha256 {s.sha256})" if s.sha256 else ""
        words = (self.meta.regen_command or "").split()[:3]
        command = " ".join(words) if len(words) == 3 and words[0] == "fairness-tests" \
            else "a score command"
        return f"someone else's {SOURCE_NOUN[s.kind]}, read from {s.file}{sha} by {command}"

    def unknown(self, what: str) -> str:
        """The hint for a fact a scored run cannot know."""
        s = self.meta.source
        return (f"{what}: not known to a run scored from someone else's "
                f"{SOURCE_NOUN[s.kind]} ({s.file}); the audit (fairness-tests audit) records it")
