"""`python -m packager` runs the command-line interface."""

from packager.cli import main

main()
