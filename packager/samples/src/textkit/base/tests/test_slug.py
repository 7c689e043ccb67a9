from textkit.slug import slugify


def test_basic() -> None:
    assert slugify("Hello World") == "hello-world"


def test_collapses_separators() -> None:
    assert slugify("a  --  b!!c") == "a-b-c"


def test_custom_separator() -> None:
    assert slugify("  Hello, World  ", sep="_") == "hello_world"
