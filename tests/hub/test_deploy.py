"""deploy/: the Zero to JupyterHub values use only keys the chart's schema allows, roles match ``sampan hub``'s,
the Dockerfile has its CPU and CUDA images, and the Python configs compile."""
from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

import pytest
import yaml

from sampan.hub.config import SERVICE_BOOT, HubSettings, roles

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


def test_kubernetes_services_start_like_the_one_machine_services(values):
    assert values["hub"]["services"]["progress"]["command"] == ["python3", "-c", SERVICE_BOOT]


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


def test_culler_hook_spares_a_learner_with_a_running_job(tmp_path):
    """The culler's hook (deploy/idle_culler_config.py) counts a learner's `sampan job` whose process lives."""
    import asyncio
    import datetime
    import subprocess
    import sys

    import psutil

    namespace = {"get_config": lambda: type("C", (), {"IdleCuller": type("I", (), {})()})()}
    exec(compile((DEPLOY / "idle_culler_config.py").read_text(), "idle_culler_config.py", "exec"), namespace)
    job = tmp_path / "lee" / ".sampan" / "jobs" / "20261203-000000-abcdef"
    job.mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        state = {"id": job.name, "status": "running", "pid": proc.pid,
                 "pid_started": psutil.Process(proc.pid).create_time()}
        (job / "job.json").write_text(json.dumps(state))
        assert namespace["running_jobs"]("lee", tmp_path) == 1
        assert namespace["running_jobs"]("kim", tmp_path) == 0
        (job / "job.json").write_text(json.dumps({**state, "pid_started": state["pid_started"] - 100}))
        assert namespace["running_jobs"]("lee", tmp_path) == 0  # that pid is now another process
        (job / "job.json").write_text(json.dumps(state))
        namespace["USERS"] = str(tmp_path)
        idle = datetime.timedelta(hours=2)
        keep = asyncio.run(namespace["busy_aware_arbiter"](idle, 3600, {"full_name": "lee/", "url": "/user/lee/"}))
        assert keep is False  # not culled: the job runs
        # a learner's FIFO or link among the job states (the culler may run as root) is skipped, without hanging
        (job.parent / "fifo-job").mkdir()
        os.mkfifo(job.parent / "fifo-job" / "job.json")
        (job.parent / "linked").symlink_to(job, target_is_directory=True)
        assert namespace["running_jobs"]("lee", tmp_path) == 1
        (tmp_path / "eve").mkdir()
        (tmp_path / "eve" / ".sampan").symlink_to(tmp_path / "lee" / ".sampan", target_is_directory=True)
        assert namespace["running_jobs"]("eve", tmp_path) == 0
    finally:
        proc.kill()
        proc.wait()
    assert namespace["running_jobs"]("lee", tmp_path) == 0


def test_a_busy_kernel_or_a_running_job_counts_as_the_servers_activity(tmp_path, monkeypatch):
    """sampan.hub.busy, in the learner's server: a kernel executing (a training that prints nothing) or a live job
    is a reason to report activity; idle kernels, a finished job or a dead job's pid are not."""
    import subprocess
    import sys
    from types import SimpleNamespace

    import psutil

    from sampan.hub import busy

    kernels = {"k1": SimpleNamespace(execution_state="idle"), "k2": SimpleNamespace(execution_state="idle")}
    manager = SimpleNamespace(list_kernel_ids=lambda: list(kernels), get_kernel=lambda k: kernels[k])
    jobs = tmp_path / "jobs"
    assert busy.busy_reason(manager, jobs) is None  # no jobs folder yet
    kernels["k2"].execution_state = "busy"
    assert busy.busy_reason(manager, jobs) == "kernel k2 busy"
    kernels["k2"].execution_state = "idle"
    (jobs / "a").mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        state = {"status": "running", "pid": proc.pid, "pid_started": psutil.Process(proc.pid).create_time()}
        (jobs / "a" / "job.json").write_text(json.dumps(state))
        assert busy.busy_reason(manager, jobs) == "1 job running"
        (jobs / "a" / "job.json").write_text(json.dumps({**state, "status": "done"}))
        assert busy.busy_reason(manager, jobs) is None
        (jobs / "a" / "job.json").write_text(json.dumps({**state, "pid_started": state["pid_started"] - 100}))
        assert busy.busy_reason(manager, jobs) is None  # that pid is another process now
    finally:
        proc.kill()
        proc.wait()
    monkeypatch.setenv("JUPYTERHUB_ACTIVITY_INTERVAL", "5")
    assert busy.mark_interval() == 2.5  # checked twice for each report the server sends the hub
    monkeypatch.setenv("JUPYTERHUB_ACTIVITY_INTERVAL", "300")
    assert busy.mark_interval() == 30.0
