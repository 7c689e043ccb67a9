"""Title case that leaves small words alone."""

SMALL_WORDS = frozenset({"a", "an", "and", "of", "the", "to"})


def title_case(text: str) -> str:
    """Capitalize each word of ``text`` except small words after the first."""
    words = text.split()
    out = []
    for i, word in enumerate(words):
        lower = word.lower()
        out.append(lower if i and lower in SMALL_WORDS else lower.capitalize())
    return " ".join(out)
