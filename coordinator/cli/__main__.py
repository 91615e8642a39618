"""``python -m coordinator.cli``: the same as the ``ordered`` console script."""

import sys

from coordinator.cli import main

sys.exit(main())
