"""packager: benchmark rows in, verified Harbor tasks and HUD environments out.

Importing the package is cheap on purpose: docker, datasets and typer are imported lazily by
the modules that need them, so `packager --help` stays fast.
"""

__version__ = "0.1.0"
