"""``python -m contrastext``: the same as the ``contrastext`` command."""

import sys

from contrastext.cli import main

sys.exit(main())
