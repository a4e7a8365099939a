"""``python -m passnet.cli``: the ``passnet`` command."""

import sys

from passnet.cli import main

sys.exit(main())
