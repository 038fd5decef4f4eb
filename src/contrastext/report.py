"""Plain-text summary tables that every job prints at its end."""

from __future__ import annotations

from typing import Any, Sequence


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 1000 else f"{value:,.1f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def format_table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = "-+-".join("-" * w for w in widths)
    out = [" | ".join(h.ljust(w) for h, w in zip(headers, widths)), line]
    for row in cells:
        out.append(" | ".join(v.rjust(w) if _numeric(v) else v.ljust(w) for v, w in zip(row, widths)))
    return "\n".join(out)


def _numeric(text: str) -> bool:
    return text.replace(",", "").replace(".", "", 1).replace("-", "", 1).isdigit()
