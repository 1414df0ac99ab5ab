"""``python -m scheduler.cli``: the ``scheduler`` command."""

import sys

from scheduler.cli import main

sys.exit(main())
