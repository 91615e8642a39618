"""``python -m ordered.cli``: the same as the ``ordered`` console script."""

import sys

from ordered.cli import main

sys.exit(main())
