import pytest
from src.stock import Inventory


def test_add_and_count() -> None:
    inv = Inventory()
    inv.add("apple", 3)
    inv.add("apple", 2)
    assert inv.count("apple") == 5
    assert inv.count("pear") == 0


def test_remove_part_of_the_stock() -> None:
    inv = Inventory()
    inv.add("apple", 5)
    inv.remove("apple", 2)
    assert inv.count("apple") == 3


def test_rejects_non_positive_quantities() -> None:
    inv = Inventory()
    with pytest.raises(ValueError):
        inv.add("apple", 0)
