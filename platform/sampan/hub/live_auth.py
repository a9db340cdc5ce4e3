"""JupyterHub login for the ``live`` Voilà service (loaded by Voilà inside that service only).

Voilà (standalone, not a Jupyter server extension: it serves only its own pages and a kernel
websocket that drops execute requests) accepts a Jupyter Server identity provider. JupyterHub ships
one for single-user servers, :class:`~jupyterhub.singleuser.extension.JupyterHubIdentityProvider`
(OAuth with the hub, then a check of the access scope ``access:services!service=live``: a logged-in
user without it gets 403). Voilà adds an identity provider's handlers without its base URL, so this
subclass puts ``/oauth_callback`` and ``/logout`` under the service prefix, where the hub sends them.

Example:
    voila DIR --Voila.identity_provider_class=sampan.hub.live_auth.LiveIdentityProvider
"""
from __future__ import annotations

from jupyterhub.singleuser.extension import JupyterHubIdentityProvider
from jupyterhub.utils import url_path_join


class LiveIdentityProvider(JupyterHubIdentityProvider):
    """JupyterHub's identity provider with its handlers under ``$JUPYTERHUB_SERVICE_PREFIX``."""

    def get_handlers(self):
        prefix = self.hub_auth.base_url
        return [(url_path_join(prefix, path), *rest) for path, *rest in super().get_handlers()]
