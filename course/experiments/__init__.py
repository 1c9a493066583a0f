"""One module per lesson registers that lesson's experiments for ``python -m course report``.

Every module in this package is imported by :func:`course.report.discover`.
"""
