"""LTI 1.3: an LMS (Canvas, Moodle, ...) launches students into the hub, gets grades back and
lists its roster on the instructor's page (docs/lms.md). All of it is optional configuration:
without ``lti`` in the service's settings none of these modules is imported.

- ``config``: the platform's registration and the tool's key, shared by hub and service.
- ``authenticator``: the hub's login (jupyterhub-ltiauthenticator, with the checks it leaves
  out); it hands each launch to the service as a short note signed with the tool's key.
- ``routes``: the service's side of a launch (what the note tells), the tool's JWKS, deep linking.
- ``services``: OAuth2 client-credentials tokens, AGS scores and NRPS memberships over aiohttp.
- ``outbox``: scores queued in the service's database until the LMS has them.
"""
