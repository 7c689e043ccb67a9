"""An in-memory stock ledger."""


class Inventory:
    """Quantities on hand, keyed by SKU."""

    def __init__(self) -> None:
        self._stock: dict[str, int] = {}

    def add(self, sku: str, qty: int) -> None:
        """Receive ``qty`` units of ``sku``."""
        if qty <= 0:
            raise ValueError("quantity must be positive")
        self._stock[sku] = self._stock.get(sku, 0) + qty

    def remove(self, sku: str, qty: int) -> None:
        """Ship ``qty`` units of ``sku``."""
        if qty <= 0:
            raise ValueError("quantity must be positive")
        self._stock[sku] = self._stock.get(sku, 0) - qty

    def count(self, sku: str) -> int:
        """Units of ``sku`` on hand."""
        return self._stock.get(sku, 0)
