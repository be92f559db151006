"""Inventory bookkeeping for a small warehouse.

Items are tracked by SKU; stock moves are recorded so a report can show where each unit went.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import defaultdict
from typing import Iterable, Iterator

LOW_STOCK = 5
CURRENCY = "EUR"


class InventoryError(Exception):
    """Raised when a stock move cannot be applied."""


@dataclasses.dataclass(frozen=True)
class Item:
    """One kind of thing the warehouse stores."""

    sku: str
    name: str
    unit_price: float  # in CURRENCY

    def label(self) -> str:
        return f"{self.sku} {self.name}"


@dataclasses.dataclass
class Move:
    sku: str
    quantity: int
    reason: str
    at: dt.datetime = dataclasses.field(default_factory=dt.datetime.now)


class Inventory:
    """Stock levels and the moves that made them."""

    def __init__(self, items: Iterable[Item] = ()):
        self._items = {item.sku: item for item in items}
        self._stock: dict[str, int] = defaultdict(int)
        self._moves: list[Move] = []

    def add_item(self, item: Item) -> None:
        if item.sku in self._items:
            raise InventoryError(f"duplicate SKU {item.sku}")
        self._items[item.sku] = item

    def receive(self, sku: str, quantity: int, reason: str = "delivery") -> None:
        # Deliveries only ever add stock.
        if quantity <= 0:
            raise InventoryError("a delivery must bring at least one unit")
        self._apply(Move(sku, quantity, reason))

    def ship(self, sku: str, quantity: int, reason: str = "order") -> None:
        if quantity > self._stock[sku]:
            raise InventoryError(
                f"cannot ship {quantity} of {sku}: only {self._stock[sku]} in stock"
            )
        self._apply(Move(sku, -quantity, reason))

    def _apply(self, move: Move) -> None:
        if move.sku not in self._items:
            raise InventoryError(f"unknown SKU {move.sku}")
        self._stock[move.sku] += move.quantity
        self._moves.append(move)

    @property
    def value(self) -> float:
        """The stock's total worth."""
        return sum(self._items[sku].unit_price * n for sku, n in self._stock.items())

    def low_stock(self, threshold: int = LOW_STOCK) -> Iterator[Item]:
        for sku, item in sorted(self._items.items()):
            if self._stock[sku] < threshold:
                yield item

    def history(self, sku: str) -> list[Move]:
        return [m for m in self._moves if m.sku == sku]


def report(inventory: Inventory, out=None) -> str:
    """Return a plain-text stock report, and write it to out when given."""
    lines = [f"Stock value: {inventory.value:.2f} {CURRENCY}"]
    low = list(inventory.low_stock())
    if low:
        lines.append("Low stock:")
        for item in low:
            lines.append(f"  - {item.label()}")
    else:
        lines.append("Nothing is running low.")
    text = "\n".join(lines) + "\n"
    if out is not None:
        out.write(text)
    return text


def _demo() -> None:
    inv = Inventory([Item("A-1", "bolt", 0.10), Item("B-7", "bracket", 2.50)])
    inv.receive("A-1", 500)
    inv.receive("B-7", 3)
    inv.ship("A-1", 120)
    print(report(inv), end="")


if __name__ == "__main__":
    _demo()
