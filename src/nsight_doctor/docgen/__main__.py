"""``python -m nsight_doctor.docgen``: rewrites the generated docs (``--check``: exits 1 when one
is stale)."""

import sys

from nsight_doctor.docgen.pages import main

sys.exit(main())
