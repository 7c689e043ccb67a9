"""Stdlib-only grading runtime copied into grader images (see docs/grading.md).

``grade.py`` is the entry point; ``parsers``, ``rules``, ``patching`` and ``judge`` are its
sibling modules. Grader images get them as one zipapp, ``/tests/grading.pyz``, whose generated
``__main__`` runs grade.py's main (packager/render/harbor.py). Nothing here may import from
outside the Python standard library, and everything must run on Python 3.9.
"""
