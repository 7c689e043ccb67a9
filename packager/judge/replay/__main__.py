"""`python -m packager.judge.replay`: the replay server and the record proxy."""

from packager.judge.replay import main

raise SystemExit(main())
