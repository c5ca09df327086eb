"""The classroom: one JupyterHub service so a class shares a model without seeing its key.

``configure(c, ...)`` in ``jupyterhub_config.py`` (hub/configure.py) adds the service; the
service itself is ``python -m deeptutor_jupyter.hub`` (hub/app.py): an OpenAI-compatible gateway
(hub/gateway.py) with quotas and usage in SQL (hub/quota.py) and an instructor page
(hub/instructor.py). See docs/hub.md. Nothing here imports the kernel side.
"""

from deeptutor_jupyter.hub.configure import configure

__all__ = ["configure"]
