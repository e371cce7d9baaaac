"""Escaped HTML for notebooks, made from the text renderings (standard library).

sm_dist's text renderings (`print(plan)`, a job's summary, its cost) share one layout: an
optional title line, then `label   value` rows whose label ends at the first run of two or more
spaces, nested by two-space indents; a row without such a gap is a heading or a note. `text_table`
turns that layout into an HTML table, so a notebook shows exactly the lines the terminal shows,
from the same renderer. Every string passes through `escape`: plans and jobs carry user-supplied
names, paths, hyperparameters and error messages.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence

#: `label  value` with the label ending at the first run of 2+ spaces; no gap: a heading or a note.
_ROW = re.compile(r"^(?P<indent> *)(?P<label>\S(?:.*?\S)?)(?: {2,}(?P<value>.*))?$")
_TABLE = 'style="border-collapse:collapse;margin:0.25em 0"'
_CELL = "text-align:left;vertical-align:top;padding:1px 0.8em 1px 0"
#: Colours for what must catch the eye (readable on light and dark themes).
_WARN, _BAD, _GOOD = "#c2410c", "#dc2626", "#16a34a"


def escape(value: object) -> str:
    """`value` as text safe inside HTML content and attribute values."""
    return html.escape(str(value), quote=True)


def _tone(label: str, value: str) -> str:
    word = label.lower()
    if word == "warning" or word.startswith("never fired"):
        return f";color:{_WARN}"
    if value.startswith(("NO ", "NO\u00a0")) or word in ("failure", "error"):
        return f";color:{_BAD}"
    if word == "verified" and value.startswith("yes"):
        return f";color:{_GOOD}"
    return ""


def text_row(line: str) -> str:
    """One line of a text rendering as a table row (empty lines give "")."""
    match = _ROW.match(line.rstrip())
    if match is None:
        return ""
    pad = f";padding-left:{len(match.group('indent')) // 2 * 1.2:g}em"
    label, value = match.group("label"), match.group("value")
    if value is None:  # a heading ("cost") or a note ("    kill:10: SIGKILL to rank 1 ...")
        return f'<tr><td colspan="2" style="{_CELL}{pad}{_tone(label, "")}">{escape(label)}</td></tr>'
    tone = _tone(label, value)
    return (f'<tr><th style="{_CELL}{pad};font-weight:normal;opacity:0.75;white-space:nowrap">{escape(label)}</th>'
            f'<td style="{_CELL}{tone}">{escape(value)}</td></tr>')


def text_table(text: str, *, title: bool = True, extra: str = "") -> str:
    """HTML for a text rendering: its first line as the caption (`title`), the rest as rows;
    `extra` is trusted HTML appended inside the block (already escaped by the caller)."""
    lines = text.splitlines()
    caption = ""
    if title and lines:
        caption = f'<caption style="text-align:left;font-weight:bold;padding-bottom:0.2em">{escape(lines[0])}</caption>'
        lines = lines[1:]
    rows = "".join(text_row(line) for line in lines)
    return f'<div class="sm-dist"><table {_TABLE}>{caption}<tbody>{rows}</tbody></table>{extra}</div>'


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, caption: str = "",
          numeric: Iterable[int] = (), wrap: Iterable[int] = (), bold: Iterable[int] = ()) -> str:
    """A plain HTML table of `rows` (cells as text, escaped) under a `caption` line; `numeric`
    columns align right; only `wrap` columns break their text over lines; `bold` rows stand out."""
    right, breaks, strong = set(numeric), set(wrap), set(bold)

    def cell(tag: str, i: int, value: object) -> str:
        align = "right" if i in right else "left"
        nowrap = "" if i in breaks else ";white-space:nowrap"
        return f'<{tag} style="text-align:{align};padding:1px 0.8em 1px 0{nowrap}">{escape(value)}</{tag}>'

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join(('<tr style="font-weight:bold">' if n in strong else "<tr>")
                   + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>" for n, row in enumerate(rows))
    cap = f'<div style="font-weight:bold;margin-top:0.25em">{escape(caption)}</div>' if caption else ""
    return f'{cap}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def details(summary: str, text: str) -> str:
    """A collapsed block (`<details>`) holding `text` preformatted, both escaped."""
    return (f'<details><summary style="cursor:pointer">{escape(summary)}</summary>'
            f'<pre style="white-space:pre-wrap;font-size:0.85em">{escape(text)}</pre></details>')


def pre(text: str) -> str:
    """`text` as an escaped, preformatted block."""
    return f'<pre style="margin:0">{escape(text)}</pre>'


__all__ = ["details", "escape", "pre", "table", "text_row", "text_table"]
