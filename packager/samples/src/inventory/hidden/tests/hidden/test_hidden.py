import pytest
from src.stock import Inventory


def test_remove_more_than_on_hand_raises() -> None:
    inv = Inventory()
    inv.add("apple", 2)
    with pytest.raises(ValueError, match="only 2 on hand"):
        inv.remove("apple", 3)


def test_failed_remove_leaves_stock_unchanged() -> None:
    inv = Inventory()
    inv.add("apple", 2)
    with pytest.raises(ValueError):
        inv.remove("apple", 5)
    assert inv.count("apple") == 2


def test_remove_unknown_sku_raises() -> None:
    inv = Inventory()
    with pytest.raises(ValueError):
        inv.remove("pear", 1)
    assert inv.count("pear") == 0
