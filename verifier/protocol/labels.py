"""Transcript labels: who asked for a request, written by the senders and read by the figures.

A label is ``GROUP/ITEM`` or ``GROUP/ITEM#REQUEST``: a case's requests are
``family/case-id#request-name``, the probe's ``probe/name``, the load probe's ``load/cC#K``
(the K-th request at concurrency C). One type writes and reads them, so that the figures
read what the senders wrote.
"""

from __future__ import annotations

import dataclasses

PROBE = "probe"
LOAD = "load"


@dataclasses.dataclass(frozen=True, slots=True)
class Label:
    """A transcript record's label.

    Args:
        group: the family, ``probe`` or ``load``.
        item: the case id, the probe's name, or the load level (``cC``).
        request: which of the item's requests (None: the item has one).
    """

    group: str
    item: str
    request: str | None = None

    def __str__(self) -> str:
        base = f"{self.group}/{self.item}"
        return base if self.request is None else f"{base}#{self.request}"

    @classmethod
    def parse(cls, text: str) -> Label:
        """The label `text` spells (the inverse of ``str``); a label without ``/`` is a group."""
        group, _, rest = text.partition("/")
        item, hashed, request = rest.partition("#")
        return cls(group, item, request if hashed else None)

    @classmethod
    def load(cls, level: int, number: int) -> Label:
        """Request `number` of the load probe at concurrency `level`."""
        return cls(LOAD, f"c{level}", str(number))

    @property
    def load_level(self) -> int | None:
        """The concurrency of a load probe's request, else None."""
        if self.group != LOAD or not self.item.startswith("c") or not self.item[1:].isdigit():
            return None
        return int(self.item[1:])
