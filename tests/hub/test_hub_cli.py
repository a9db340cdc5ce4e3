"""``sampan hub`` and ``sampan publish --serve`` argument checks (no server started: --dry-run)."""
from __future__ import annotations

import os

from sampan.cli import main


def test_hub_dry_run_prints_the_settings_and_the_jupyterhub_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SAMPAN_HUB_LEARNER_USER", "root")  # as root (CI) the choice must be made: see below
    roster = tmp_path / "class.csv"
    roster.write_text("username,role\nkim,teacher\nlee,student\n")
    assert main(["hub", "--dry-run", "--dir", str(tmp_path / "hub"), "--roster", str(roster), "--port", "8123"]) == 0
    out = capsys.readouterr().out
    assert "SAMPAN_HUB_IP=127.0.0.1" in out and "SAMPAN_HUB_PORT=8123" in out
    assert "-m jupyterhub -f" in out and "deploy/jupyterhub_config.py" in out
    assert "PASSWORD" not in out  # no secret on a command line or in the printed settings


def test_hub_refuses_a_lan_address_without_tls_and_bad_names(tmp_path, capsys):
    assert main(["hub", "--dry-run", "--ip", "0.0.0.0"]) == 2
    assert "Expected `--ip` to be 127.0.0.1, or --ssl-cert and --ssl-key" in capsys.readouterr().err
    assert main(["hub", "--dry-run", "--teacher", "Kim Lee"]) == 2
    assert "Expected `--teacher` to be lower-case letters" in capsys.readouterr().err
    roster = tmp_path / "class.csv"
    roster.write_text("username,role\nlee,principal\n")
    assert main(["hub", "--dry-run", "--roster", str(roster)]) == 2
    assert "line 2 role" in capsys.readouterr().err


def test_as_root_the_hub_asks_who_the_learners_servers_run_as(capsys, monkeypatch):
    import os

    monkeypatch.delenv("SAMPAN_HUB_LEARNER_USER", raising=False)
    if os.geteuid() != 0:
        assert main(["hub", "--dry-run"]) == 0  # the servers run as this account, as documented
        return
    assert main(["hub", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "Expected `SAMPAN_HUB_LEARNER_USER` to be the account the learners' servers run as" in err
    assert "useradd --system" in err and "SAMPAN_HUB_LEARNER_USER=root to accept" in err
    monkeypatch.setenv("SAMPAN_HUB_LEARNER_USER", "no-such-account-x")
    assert main(["hub", "--dry-run"]) == 2
    assert "the Unix user 'no-such-account-x' does not exist" in capsys.readouterr().err


def test_publish_serve_uses_the_dashboard_security_settings_and_preheated_kernels(capsys):
    assert main(["publish", "--serve", "--dry-run"]) == 0
    out = capsys.readouterr().out
    for flag in ("--VoilaConfiguration.strip_sources=True", "--VoilaConfiguration.show_tracebacks=False",
                 "--VoilaConfiguration.preheat_kernel=True", "--Voila.ip=127.0.0.1"):
        assert flag in out
    assert "--Voila.auto_token=True" in out and "IdentityProvider.token" not in out  # token: in the environment


def test_hub_tls_files_come_together_and_exist(tmp_path, capsys, monkeypatch):
    """--ssl-cert without --ssl-key crashed with a TypeError; a missing file reached JupyterHub."""
    monkeypatch.setenv("SAMPAN_HUB_LEARNER_USER", "root")
    cert, key = tmp_path / "hub.crt", tmp_path / "hub.key"
    cert.write_text("cert")
    assert main(["hub", "--dry-run", "--ssl-cert", str(cert)]) == 2
    assert (f"Expected `--ssl-key` to be the file that goes with --ssl-cert {cert}. Received: --ssl-key=None. "
            "HINT: give both --ssl-cert CERT and --ssl-key KEY") in capsys.readouterr().err
    assert main(["hub", "--dry-run", "--ssl-key", str(key)]) == 2
    assert "Expected `--ssl-cert` to be the file that goes with --ssl-key" in capsys.readouterr().err
    assert main(["hub", "--dry-run", "--ip", "192.168.1.10", "--ssl-cert", str(cert), "--ssl-key", str(key)]) == 2
    assert f"Expected `--ssl-key` to be an existing PEM file. Received: --ssl-key='{key}'" in capsys.readouterr().err
    key.write_text("key")
    assert main(["hub", "--dry-run", "--ip", "192.168.1.10", "--ssl-cert", str(cert), "--ssl-key", str(key)]) == 0
    assert f"SAMPAN_HUB_SSL_KEY={key}" in capsys.readouterr().out


def test_hub_prints_the_port_it_picked_and_brackets_ipv6(tmp_path, capsys, monkeypatch):
    """`--port 0` printed ":0" as the address to open; `--ip ::1` built http://::1:8000/."""
    import sampan.cli.hub as cli_hub
    from sampan.hub.config import HubSettings, public_url

    monkeypatch.setenv("SAMPAN_HUB_LEARNER_USER", "root")
    monkeypatch.setenv("SAMPAN_HUB_TEACHER_PASSWORD", "river-boat-lantern-2718")
    monkeypatch.chdir(tmp_path)
    execs = []
    monkeypatch.setattr(cli_hub.os, "execv", lambda exe, cmd: execs.append(os.environ["SAMPAN_HUB_PORT"]))
    for name in ("SAMPAN_HUB_PORT", "SAMPAN_HUB_DIR", "SAMPAN_HUB_IP", "SAMPAN_HUB_TEACHER",
                 "SAMPAN_HUB_TEACHER_PASSWORD_FILE"):
        monkeypatch.setenv(name, "")  # run() sets them for the hub it would start: restored after the test
        monkeypatch.delenv(name)
    assert main(["hub", "--port", "0", "--ip", "::1", "--dir", str(tmp_path / "hub")]) == 0
    assert execs and execs[0] != "0"
    assert f"Sampan hub: http://[::1]:{execs[0]}/hub/" in capsys.readouterr().out
    assert HubSettings(hub_dir=tmp_path, ip="::1").public_url == "http://[::1]:8000/"
    assert public_url("127.0.0.1", 8000, tls=True) == "https://127.0.0.1:8000/"
