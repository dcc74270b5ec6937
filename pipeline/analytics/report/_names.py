"""How the report names bots: by the name the service's listing gives them (``bot_names``), with
the id on hover, and the id shown too where two bots share a name (or a bot has none).

Names come from the service and are untrusted text: every place that shows one escapes it for
its context (HTML here; the chart options are JSON inside a script element, see _report).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import polars as pl

ID_TAIL = 6  # digits of the id that tell two bots of one name apart on a chart's axis


# What Python's str.strip() strips (str.isspace), for polars to strip the same.
_SPACE = "".join(chr(c) for c in range(0x3001) if chr(c).isspace())


@dataclass(frozen=True)
class Names:
    """bot_id -> name, and which names more than one bot has.

    Held as two columns sorted by id rather than a dict: a directory of 100,000 bots is 3 MB
    so, against 18 MB of Python strings (docs/design.md, "Memory")."""

    ids: pl.Series  # bot_id of the bots with a name, sorted
    values: pl.Series  # their names
    shared: frozenset[str]

    @classmethod
    def of(cls, frame: pl.DataFrame) -> Names:
        """From ``bot_names`` rows (bot_id, name); a bot without a name is named by its id."""
        named = (frame.select("bot_id", "name").with_row_index("_at")
                 .filter(pl.col("name").str.strip_chars(_SPACE).str.len_chars() > 0)
                 # A bot listed twice: its last row's name.
                 .sort("bot_id", "_at").unique("bot_id", keep="last", maintain_order=True))
        shared = named.group_by("name").len().filter(pl.col("len") > 1)["name"]
        return cls(named["bot_id"], named["name"], frozenset(shared.to_list()))

    def _get(self, bot_id: str) -> str | None:
        at = int(self.ids.search_sorted(bot_id))
        if at < self.ids.len() and self.ids[at] == bot_id:
            name: str = self.values[at]
            return name
        return None

    def name(self, bot_id: str) -> str:
        return self._get(bot_id) or bot_id

    def needs_id(self, bot_id: str) -> bool:
        """Whether the name alone would not say which bot: shared, or none at all."""
        name = self._get(bot_id)
        return name is None or name in self.shared

    def label(self, bot_id: str) -> str:
        """A short label for a chart: the name, with the id's last digits where needed."""
        name = self._get(bot_id)
        if name is None:
            return bot_id
        if name in self.shared:
            return f"{name} (…{bot_id[-ID_TAIL:]})"
        return name

    def cell(self, bot_id: str) -> str:
        """A table cell: the name, the id on hover, and the id shown as well where needed."""
        name = self._get(bot_id)
        shown = html.escape(name if name is not None else bot_id)
        if name is not None and name in self.shared:
            shown += f' <span class="id">{html.escape(bot_id)}</span>'
        return f'<td class="bot" title="{html.escape(bot_id)}">{shown}</td>'
