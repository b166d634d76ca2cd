"""Write a run's Fairness Card: ``card.yaml`` (the record), ``card.md`` (with the
supporting tables it links as ``tables/*.csv``), ``card.html``.

Files are written atomically (temporary file + rename), so an interrupted write
never leaves half a card. The YAML is dumped with sorted keys and the fixed
number formatting of :mod:`.values`, so the same run gives byte-identical files.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

import yaml

from fairness_tests.card.fill import fill_card
from fairness_tests.card.render_html import render_html
from fairness_tests.card.render_md import TABLES_DIR, markdown_tables, render_markdown
from fairness_tests.card.schema import ValidationReport, user_fields, validate_card
from fairness_tests.card.sections.gate import load_gate
from fairness_tests.card.user_yaml import load_user_yaml
from fairness_tests.core.errors import ConfigError
from fairness_tests.core.io import atomic_write_text
from fairness_tests.core.project import find_project
from fairness_tests.core.validate import line_index, nearest_line
from fairness_tests.run.result import RunResult

ENV_USER_YAML = "FAIRNESS_CARD_USER_YAML"   # the user YAML when none is passed (pytest plugin)
CARD_FILES = {"yaml": "card.yaml", "md": "card.md", "html": "card.html"}


def default_user_yaml(model: str | None) -> str | None:
    """``<cards>/<model slug>.yaml``, the project's or else the package's, when it
    exists: what a run cannot know about a model (intended use, governance, ...)."""
    p = find_project().card_yaml(model)
    return str(p) if p else None


@dataclass
class WrittenCard:
    card: dict
    paths: dict[str, Path]
    report: ValidationReport = field(default_factory=ValidationReport)


def dump_yaml(card: dict) -> str:
    """The card as YAML text: sorted keys, block style, UTF-8, stable line width."""
    header = ("# Fairness Card written by fairness_tests (schema: "
              "fairness_tests/data/card_schema;\n"
              "# validates against the published core.yaml + llm.yaml). Edit the user YAML, not "
              "this file.\n")
    # libyaml's emitter when present (3-4x faster; the same text for our cards, a test
    # checks), else PyYAML's own
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return header + yaml.dump(card, Dumper=dumper, sort_keys=True, allow_unicode=True,
                              default_flow_style=False, width=100)


_atomic_write = atomic_write_text


def explorer_link(kind: str, text: str, href: str) -> str:
    """``text`` (card.md or card.html) with a link to the run explorer at ``href`` below
    its title (the YAML, the record, is unchanged)."""
    label = "Run explorer: the items behind each verdict"
    if kind == "html":
        link = (f'<p class="explorer"><a href="{escape(href, quote=True)}">{escape(label)}'
                "</a></p>")
        return text.replace("<main>", "<main>\n" + link, 1)
    if kind == "md":
        head, _, rest = text.partition("\n")
        return f"{head}\n\n[{label}]({href})\n{rest}"
    return text


def render_card_files(card: dict, out_dir: str | os.PathLike,
                      kinds: tuple[str, ...] = ("yaml", "md", "html"),
                      explorer: str | None = None) -> dict[str, Path]:
    """Write card.yaml, card.md and card.html (or the ``kinds`` asked) for a filled card;
    ``explorer``: the run explorer's address, linked from card.md and card.html."""
    out = Path(out_dir)
    render = {"yaml": dump_yaml, "md": render_markdown, "html": render_html}
    texts = {k: render[k](card) for k in kinds}
    if explorer:
        texts = {k: explorer_link(k, t, explorer) for k, t in texts.items()}
    tables = markdown_tables(card) if "md" in kinds else {}
    paths = {}
    for rel, text in tables.items():       # the CSV files card.md links, first
        _atomic_write(out / rel, text)
    if "md" in kinds and (out / TABLES_DIR).is_dir():
        for old in (out / TABLES_DIR).glob("*.csv"):
            if f"{TABLES_DIR}/{old.name}" not in tables:
                old.unlink()               # a table this card no longer has
    for kind in kinds:
        name = CARD_FILES[kind]
        paths[kind] = out / name
        _atomic_write(paths[kind], texts[kind])
    return paths


def write_cards(run: RunResult, out_dir: str | os.PathLike,
                user_yaml: str | os.PathLike | dict | None = None,
                gate: str | os.PathLike | dict | None = None,
                explorer: str | None = None) -> WrittenCard:
    """Fill, validate and write the card of ``run`` into ``out_dir``.

    ``user_yaml``: a path to the user YAML (or an already loaded dict, or None:
    then ``$FAIRNESS_CARD_USER_YAML`` if set, else the model's card YAML of the
    project or the package, :func:`default_user_yaml`).
    ``gate``: the record of ``fairness-tests gate`` with this run as the candidate
    (a dict, a ``gate.json`` or the directory ``gate --out`` wrote): the card's
    upgrade-gate section. ``explorer``: the address of the run's explorer
    (``fairness-tests view``), relative to ``out_dir`` or a URL, linked from the card.
    A bad user YAML raises :class:`ConfigError` naming its file, line and key
    before anything is written. A card that is merely incomplete is written and
    its ``report.missing`` lists what is missing. A structural problem in the
    run-filled part is written too (nothing is lost) and then raised.
    """
    source = None
    if user_yaml is None and os.environ.get(ENV_USER_YAML):
        user_yaml = os.environ[ENV_USER_YAML]
    if user_yaml is None:
        user_yaml = default_user_yaml(run.metadata.model)
    if isinstance(user_yaml, dict):
        user = user_yaml
    elif user_yaml:
        source = str(user_yaml)
        user = load_user_yaml(os.fspath(user_yaml))
    else:
        user = {}
    gate_source = "gate record"
    if gate is not None and not isinstance(gate, dict):
        gate_source, gate = load_gate(os.fspath(gate))
    card = fill_card(run, user, user_source=source, gate=gate, gate_source=gate_source)
    report = validate_card(card, source="card.yaml")
    user_paths = [f["path"] for f in user_fields()["fields"]]
    for p in report.errors:
        if any(p.key == u or p.key.startswith(u + ".") or p.key.startswith(u + "[")
               for u in user_paths):
            line = None
            if source:
                lines = line_index(Path(source).read_text(encoding="utf-8"))
                line = nearest_line(p.key, lines)
            raise ConfigError(f"{p.message} [{p.schema}]", path=source or "user YAML",
                              line=line, key=p.key)
    paths = render_card_files(card, out_dir, explorer=explorer)
    if report.errors:
        first = report.errors[0]
        raise ConfigError(f"the card written to {paths['yaml']} is invalid: {first.message} "
                          f"[{first.schema}]", key=first.key)
    return WrittenCard(card=card, paths=paths, report=report)
