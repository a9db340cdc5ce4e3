"""deploy/: the Zero to JupyterHub values use only keys the chart's schema allows, roles match ``sampan hub``'s,
the Dockerfile has its CPU and CUDA images, and the Python configs compile."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import yaml

from sampan.hub.config import HubSettings, roles

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SCHEMA = json.loads((Path(__file__).with_name("z2jh_values_keys.json")).read_text())["schema"]
# singleuser.profileList items pass through to KubeSpawner: a profile's keys, and the KubeSpawner traits we override
PROFILE_KEYS = {"display_name", "description", "default", "slug", "kubespawner_override", "profile_options"}
KUBESPAWNER_TRAITS = {"image", "cpu_limit", "cpu_guarantee", "mem_limit", "mem_guarantee", "node_selector",
                      "extra_resource_limits", "extra_resource_guarantees", "tolerations", "environment"}


def unknown_keys(values, node, path=""):
    """Every key of ``values`` the (vendored) schema does not allow, as dotted paths."""
    if isinstance(values, list):
        items = node.get("items")
        return [bad for i, v in enumerate(values) for bad in (unknown_keys(v, items, f"{path}[{i}]") if items else [])]
    if not isinstance(values, dict) or node.get("open") and "keys" not in node:
        return []
    found = []
    for key, value in values.items():
        if key not in node["keys"]:
            if not node["open"] and not any(re.search(p, key) for p in node.get("patterns", [])):
                found.append(f"{path}.{key}".lstrip("."))
            continue
        child = node.get("children", {}).get(key)
        if child:
            found += unknown_keys(value, child, f"{path}.{key}")
    return found


@pytest.fixture(scope="module")
def values():
    return yaml.safe_load((DEPLOY / "values.yaml").read_text())


def test_helm_values_use_only_keys_of_the_charts_schema(values):
    assert unknown_keys(values, SCHEMA) == []
    broken = {**values, "singleuser": {**values["singleuser"], "storrage": {}}}  # the check does catch a typo
    assert unknown_keys(broken, SCHEMA) == ["singleuser.storrage"]


def test_profiles_cover_cpu_shared_and_full_gpu(values):
    profiles = values["singleuser"]["profileList"]
    for profile in profiles:
        assert set(profile) <= PROFILE_KEYS
        assert set(profile.get("kubespawner_override", {})) <= KUBESPAWNER_TRAITS
    gpus = [p["kubespawner_override"]["extra_resource_limits"]["nvidia.com/gpu"] for p in profiles[1:]]
    assert [p["display_name"] for p in profiles] == ["CPU", "Shared GPU", "Full GPU"] and gpus == ["1", "1"]


def test_kubernetes_roles_are_the_one_machine_roles(values):
    local = {r["name"]: sorted(r["scopes"]) for r in roles(HubSettings(hub_dir=Path("/nonexistent")))}
    helm = {name: sorted(r["scopes"]) for name, r in values["hub"]["loadRoles"].items()}
    assert helm == local
    assert values["hub"]["config"]["JupyterHub"]["custom_scopes"].keys() == {"custom:progress:read",
                                                                           "custom:progress:write"}


def test_dockerfile_and_python_configs():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert " AS cpu" in dockerfile and " AS cuda" in dockerfile
    for name in ("jupyterhub_config.py", "idle_culler_config.py", "batchspawner_config.py"):
        ast.parse((DEPLOY / name).read_text(), filename=name)
