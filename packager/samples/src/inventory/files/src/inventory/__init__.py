"""Track stock levels per SKU."""

from inventory.stock import Inventory

__all__ = ["Inventory"]
