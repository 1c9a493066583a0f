"""The public names of ``course`` that had no door (no ``@arguments`` rules, no opening validation) when
tests/test_every_door.py was written (issue 49): debt, frozen.  Take a name off when it gains its rules; never
add one (declare the new function's rules instead)."""

UNVALIDATED = {
    "course.kernels.plots": "draw_trace draw_warps scan_padding_report show",
}

#: Declared rules that let one of their kind's bad values through, or refuse it with no course error, when the walk
#: was written (``qual(argument)``): each is a lesson's own validator, in a module outside that change.
RULE_GAPS = """
course.parallel.mpi.run_mpi(task)
"""
