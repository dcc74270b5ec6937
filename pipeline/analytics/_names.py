"""How the report names bots: by the name the service's listing gives them (``bot_names``), with
the id on hover, and the id shown too where two bots share a name (or a bot has none).

Names come from the service and are untrusted text: every place that shows one escapes it for
its context (HTML here; the chart options are JSON inside a script element, see _report).
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass

import polars as pl

ID_TAIL = 6  # digits of the id that tell two bots of one name apart on a chart's axis


@dataclass(frozen=True)
class Names:
    """bot_id -> name, and which names more than one bot has."""

    names: dict[str, str]
    shared: frozenset[str]

    @classmethod
    def of(cls, frame: pl.DataFrame) -> Names:
        """From ``bot_names`` rows (bot_id, name); a bot without a name is named by its id."""
        names = {bot: name for bot, name in frame.select("bot_id", "name").iter_rows()
                 if name is not None and name.strip()}
        counts = Counter(names.values())
        return cls(names, frozenset(n for n, k in counts.items() if k > 1))

    def name(self, bot_id: str) -> str:
        return self.names.get(bot_id, bot_id)

    def needs_id(self, bot_id: str) -> bool:
        """Whether the name alone would not say which bot: shared, or none at all."""
        return bot_id not in self.names or self.names[bot_id] in self.shared

    def label(self, bot_id: str) -> str:
        """A short label for a chart: the name, with the id's last digits where needed."""
        if bot_id not in self.names:
            return bot_id
        if self.names[bot_id] in self.shared:
            return f"{self.names[bot_id]} (…{bot_id[-ID_TAIL:]})"
        return self.names[bot_id]

    def cell(self, bot_id: str) -> str:
        """A table cell: the name, the id on hover, and the id shown as well where needed."""
        shown = html.escape(self.name(bot_id))
        if bot_id in self.names and self.needs_id(bot_id):
            shown += f' <span class="id">{html.escape(bot_id)}</span>'
        return f'<td class="bot" title="{html.escape(bot_id)}">{shown}</td>'
