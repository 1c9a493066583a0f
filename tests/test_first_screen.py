"""Every lesson shows something live within its first ~250 words (a figure, a widget or a measured number).

The cell that does it carries the tag ``first-screen``; the words a learner reads before it (markdown
cells, the title included) are counted here.  Longer background lives further down ("Going deeper").
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("0*.ipynb"))
MAX_WORDS = 250
TAG = "first-screen"


def _words(text: str) -> int:
    text = re.sub(r"\(https?://[^)]*\)", "", text)        # a link's address is not read
    text = re.sub(r"<[^>]+>", " ", text)                   # nor are HTML tags
    return len(re.findall(r"[^\W_]+(?:['’][^\W_]+)?", text))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_first_figure_widget_or_measured_number_comes_within_250_words(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    tagged = [i for i, c in enumerate(cells) if TAG in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: tag exactly one code cell '{TAG}' (the first live figure/widget/number)"
    first = tagged[0]
    assert cells[first]["cell_type"] == "code", f"{path.name}: the '{TAG}' cell must be a code cell"
    words = sum(_words("".join(c["source"])) for c in cells[:first] if c["cell_type"] == "markdown")
    assert words <= MAX_WORDS, (f"{path.name}: {words} words before its first live figure, widget or number "
                                f"(at most {MAX_WORDS}); move background into a 'Going deeper' section")


def test_the_word_count_reads_prose_not_markup():
    assert _words("A [link](https://example.org/a/b) and <b>bold</b> text, don't") == 6
