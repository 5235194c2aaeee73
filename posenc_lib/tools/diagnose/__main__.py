"""``python -m posenc_lib.tools.diagnose ...``: the command line (also
``python -m posenc_lib diagnose ...``)."""

import sys

from .cli import main

sys.exit(main())
