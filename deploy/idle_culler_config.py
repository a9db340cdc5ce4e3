# jupyterhub-idle-culler configuration of `sampan hub` (passed with --config=...): culling stops servers idle
# longer than --timeout, but never a server whose kernel is executing (a training in progress sends no
# messages, so it looks idle to the hub). Before culling, the hook asks the server's Jupyter API for its
# kernels and keeps the server when one is busy. The culler's token needs `access:servers` (sampan.hub.config).
# Deliberately free of `import sampan` (which imports torch): the culler stays a small process.
import json
import os

from tornado.httpclient import AsyncHTTPClient, HTTPClientError

PUBLIC_URL = os.environ.get("SAMPAN_HUB_PUBLIC_URL", "http://127.0.0.1:8000/")
TOKEN = os.environ.get("JUPYTERHUB_API_TOKEN", "")


async def busy_aware_arbiter(inactive, inactive_limit, server):
    if inactive is None or inactive.total_seconds() < inactive_limit:
        return False
    url = PUBLIC_URL.rstrip("/") + server["url"] + "api/kernels"
    try:
        response = await AsyncHTTPClient().fetch(url, headers={"Authorization": f"token {TOKEN}"},
                                                  request_timeout=20, validate_cert=False)
    except (HTTPClientError, OSError):
        return True  # a server that cannot answer is not working on anything
    kernels = json.loads(response.body)
    return not any(k.get("execution_state") == "busy" for k in kernels)


c = get_config()  # noqa: F821 - provided by the culler
c.IdleCuller.cull_arbiter_hook = busy_aware_arbiter
