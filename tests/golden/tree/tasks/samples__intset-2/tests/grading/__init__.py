"""Stdlib-only grading runtime copied into grader images (see docs/grading.md).

``grade.py`` is the entry point (run as a script at ``/tests/grading/grade.py``); ``parsers``,
``rules`` and ``patching`` are its sibling modules. Nothing here may import from outside the
Python standard library, and everything must run on Python 3.9.
"""
