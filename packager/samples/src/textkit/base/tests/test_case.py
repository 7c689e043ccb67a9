from textkit.case import title_case


def test_small_words() -> None:
    assert title_case("the lord of the rings") == "The Lord of the Rings"


def test_first_word_always_capitalized() -> None:
    assert title_case("a tale") == "A Tale"
