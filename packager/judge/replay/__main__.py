"""`python -m packager.judge.replay`: the replay server and the record proxy."""

from packager.judge.replay.cli import main

raise SystemExit(main())
