"""Render a card (dict) as Markdown. Deterministic: same card, same bytes."""
from __future__ import annotations

from . import layout as L

STATUS_MARK = {"pass": "pass", "fail": "**FAIL**", "mixed": "**MIXED**",
               "expected_fail": "expected fail", "not_evaluable": "_not evaluable_"}


def _esc(text: str) -> str:
    """Escape text for a Markdown paragraph or table cell (no raw HTML, no pipes)."""
    return (str(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
            .replace(">", "&gt;").replace("\n", " ").replace("*", "\\*").replace("_", "\\_"))


def _code(text: str) -> str:
    t = str(text).replace("\n", " ")
    fence = "``" if "`" in t else "`"
    return f"{fence}{t}{fence}"


def render_markdown(card: dict) -> str:
    out: list[str] = []
    for block in L.build(card):
        out.extend(_block(block))
    text = "\n".join(out).rstrip("\n") + "\n"
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text


def _block(b) -> list[str]:
    if isinstance(b, L.Heading):
        return ["#" * b.level + " " + _esc(b.text), ""]
    if isinstance(b, L.Para):
        if b.style == "label":
            return [f"**{_esc(b.text)}**", ""]
        if b.style == "note":
            return [f"_{_esc(b.text)}_", ""]
        if b.style == "warn":
            return [f"> **Note:** {_esc(b.text)}", ""]
        if b.style == "summary":
            return [f"> {_esc(b.text)}", ""]
        return [_esc(b.text), ""]
    if isinstance(b, L.KV):
        return [f"- **{_esc(k)}:** {_esc(v)}" for k, v in b.pairs] + [""]
    if isinstance(b, L.Items):
        return [f"- {_esc(i)}" for i in b.items] + [""]
    if isinstance(b, L.Code):
        return ["```text", *str(b.text).splitlines(), "```", ""]
    if isinstance(b, L.Missing):
        src = "the run did not record it" if b.source == "run" else "supply it in the user YAML"
        return [f"- **MISSING** `{b.field}` ({src}){': ' + _esc(b.hint) if b.hint else ''}", ""]
    if isinstance(b, L.Table):
        lines = []
        if b.caption:
            lines += [f"_{_esc(b.caption)}_", ""]
        lines.append("| " + " | ".join(_esc(c) for c in b.columns) + " |")
        lines.append("|" + "---|" * len(b.columns))
        for row in b.rows:
            cells = [_esc(c) for c in row]
            if b.status_col is not None and b.status_col < len(row):
                cells[b.status_col] = STATUS_MARK.get(row[b.status_col], cells[b.status_col])
            lines.append("| " + " | ".join(cells) + " |")
        return lines + [""]
    if isinstance(b, L.Plot):
        return [f"_Plot in card.html: {_esc(b.title)}._", ""]
    raise TypeError(f"unknown block {b!r}")
