"""The public names of ``course`` that had no door (no ``@arguments`` rules, no opening validation) when
tests/test_every_door.py was written (issue 49): debt, frozen.  Take a name off when it gains its rules; never
add one (declare the new function's rules instead)."""

UNVALIDATED: dict[str, str] = {}

#: Declared rules that let one of their kind's bad values through, or refuse it with no course error, when the walk
#: was written (``qual(argument)``): each is a lesson's own validator, in a module outside that change.
RULE_GAPS = """
"""
