"""``python -m manager`` is the ``overseer`` command."""

from manager.cli import main

raise SystemExit(main())
