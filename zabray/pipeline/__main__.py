"""``python -m zabray.pipeline check RUN_DIR ...``."""

import sys

from zabray.pipeline.cli import main

sys.exit(main())
