"""``python -m deeptutor_jupyter.hub``: the course service (deeptutor_jupyter/hub/app.py)."""

from deeptutor_jupyter.hub.app import main

raise SystemExit(main())
