"""The classroom benchmark: N learners sign up, log in and start their servers at once on one machine.

Measures, on a real ``sampan hub`` (JupyterHub, configurable-http-proxy, SQLite) in a temporary folder:

- the time from the start of the rush until each learner's server answers ``/user/NAME/api/status``
  (p50, p95, max);
- hub API latency (``GET /hub/api/users/NAME``) sampled during the rush (p50, p95);
- the memory of each idle learner server (RSS and USS of its process tree, median and max).

Goal (issue 18): 20 learners ready within 60 s on 2 cores; an idle server under 150 MiB.

Example:
    python -m sampan.hub.bench --learners 20
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from sampan.utils.net import free_port

PASSWORD = "bench-password-2718"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _learner(url: str, name: str, t0: float, ready: dict, errors: dict) -> None:
    import requests

    try:
        s = requests.Session()
        for path, data in (("hub/signup", {"username": name, "signup_password": PASSWORD,
                                           "signup_password_confirmation": PASSWORD}),
                           ("hub/login", {"username": name, "password": PASSWORD})):
            s.get(url + path, timeout=60)
            s.post(url + path, data={**data, "_xsrf": s.cookies.get("_xsrf", "")}, timeout=120)
        xsrf = {"X-XSRFToken": s.cookies.get("_xsrf", "")}
        token = s.post(url + f"hub/api/users/{name}/tokens", json={}, headers=xsrf, timeout=60).json()["token"]
        auth = {"Authorization": f"token {token}"}
        requests.post(url + f"hub/api/users/{name}/server", headers=auth, timeout=120)
        while time.time() - t0 < 600:
            try:
                if requests.get(url + f"user/{name}/api/status", headers=auth, timeout=10).status_code == 200:
                    ready[name] = time.time() - t0
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        errors[name] = "not ready after 600 s"
    except Exception as exc:  # reported in the result, the other learners go on
        errors[name] = f"{type(exc).__name__}: {exc}"


def _server_memory() -> list[tuple[float, float]]:
    """(RSS, USS) in MiB of each single-user server with its kernels-free process tree."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if "jupyterhub.singleuser" in cmd:
            try:
                procs = [proc, *proc.children(recursive=True)]
                rss = sum(p.memory_info().rss for p in procs) / 2**20
                uss = sum(p.memory_full_info().uss for p in procs) / 2**20
            except psutil.Error:
                continue
            found.append((rss, uss))
    return found


def run(quick: bool = False, *, learners: int | None = None, idle_seconds: float = 15.0) -> dict:
    """Runs the rush on a fresh hub (20 learners, 5 with ``quick``); prints and returns the figures
    (seconds, milliseconds, MiB). This is ``sampan bench hub``."""
    result = _rush(learners or (5 if quick else 20), idle_seconds)
    print(json.dumps(result, indent=2))
    return result


def _rush(learners: int, idle_seconds: float) -> dict:
    import requests

    with tempfile.TemporaryDirectory(prefix="sampan-hub-bench-") as tmp:
        names = [f"learner{i:02d}" for i in range(learners)]
        roster = Path(tmp) / "roster.csv"
        roster.write_text("username,role\n" + "".join(f"{n},student\n" for n in names))
        port = free_port()
        url = f"http://127.0.0.1:{port}/"
        env = {**os.environ, "SAMPAN_DATA": str(Path(tmp) / "data"), "SAMPAN_HUB_TEACHER_PASSWORD": PASSWORD,
               "SAMPAN_HUB_LEARNER_USER": os.environ.get("SAMPAN_HUB_LEARNER_USER", "root")}
        log = open(Path(tmp) / "hub.log", "w")
        hub = subprocess.Popen([sys.executable, "-m", "sampan", "hub", "--port", str(port), "--dir",
                                str(Path(tmp) / "hub"), "--roster", str(roster)], env=env, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.time() + 120
            while time.time() < deadline:
                try:
                    if requests.get(url + "hub/api/", timeout=3).status_code == 200:
                        break
                except requests.RequestException:
                    time.sleep(0.5)
            admin = requests.Session()
            admin.get(url + "hub/login")
            admin.post(url + "hub/login", data={"username": "teacher", "password": PASSWORD,
                                                "_xsrf": admin.cookies.get("_xsrf", "")})
            ready, errors, latency = {}, {}, []
            t0 = time.time()
            threads = [threading.Thread(target=_learner, args=(url, n, t0, ready, errors)) for n in names]
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads):
                start = time.perf_counter()
                admin.get(url + f"hub/api/users/{names[0]}", timeout=60)
                latency.append((time.perf_counter() - start) * 1000)
                time.sleep(0.25)
            time.sleep(idle_seconds)
            memory = _server_memory()
        finally:
            os.killpg(hub.pid, signal.SIGTERM)
            hub.wait(60)
    times = list(ready.values())
    return {
        "learners": learners, "ready": len(times), "errors": errors,
        "ready_p50_s": round(_pct(times, 0.5), 1) if times else None,
        "ready_p95_s": round(_pct(times, 0.95), 1) if times else None,
        "ready_max_s": round(max(times), 1) if times else None,
        "api_latency_p50_ms": round(_pct(latency, 0.5), 1), "api_latency_p95_ms": round(_pct(latency, 0.95), 1),
        "idle_server_rss_mib_median": round(statistics.median(m[0] for m in memory), 1) if memory else None,
        "idle_server_rss_mib_max": round(max(m[0] for m in memory), 1) if memory else None,
        "idle_server_uss_mib_median": round(statistics.median(m[1] for m in memory), 1) if memory else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sampan.hub.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learners", type=int, default=20, help="learners rushing in at once (default 20)")
    args = parser.parse_args(argv)
    from sampan.errors import check_int

    result = run(learners=check_int("--learners", args.learners))
    return 0 if result["ready"] == result["learners"] else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
