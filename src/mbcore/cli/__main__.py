"""``python -m mbcore.cli``: the ``mbcore`` command."""
import sys

from .app import main

sys.exit(main())
