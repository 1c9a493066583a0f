"""A check cell in a notebook shows the check's words and nothing after them: no ``Out: False`` under
"Not done yet", no ``Out: True`` under "Correct"; its verdict still counts as a bool for ``assert`` (nbgrader)."""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

import course.check as check
from course.check import Verdict

CELLS = [
    "import course.check\nfrom numba import cuda\n"
    "def stub(out, a):\n    raise NotImplementedError\n"
    "def relu(out, a):\n    i = cuda.grid(1)\n    out[i] = max(a[i], 0.0)",
    "course.check.check_kernel_map(stub)",
    "course.check.check_kernel_map(relu)",
    "assert course.check.check_kernel_map(relu)\nassert not course.check.check_kernel_map(stub)\n"
    "print(course.check.check_kernel_map(relu) == True, course.check.check_kernel_map(stub) == False)",
]


@pytest.mark.slow
def test_a_check_cell_shows_its_words_and_no_bool():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    not_done, correct, asserted = nb.cells[1].outputs, nb.cells[2].outputs, nb.cells[3].outputs
    assert [o["output_type"] for o in not_done] == ["stream"] and "Not done yet" in not_done[0]["text"]
    assert [o["output_type"] for o in correct] == ["stream"] and "Correct" in correct[0]["text"]
    assert "True True" in "".join(o.get("text", "") for o in asserted)


def test_outside_a_notebook_a_check_returns_a_plain_bool():
    from course.kernels import reference

    assert check.check_kernel_map(reference.relu_map) is True


def test_a_verdict_counts_as_its_bool():
    yes, no = Verdict(True), Verdict(False)
    assert yes and not no and yes == True and no == False and yes != no  # noqa: E712
    assert repr(no) == "False" and {yes, True} == {True}
