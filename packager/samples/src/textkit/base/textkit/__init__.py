"""Small text helpers."""

__version__ = "1.0.0"
