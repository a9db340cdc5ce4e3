"""Who gets which account on the hub: a roster name cannot hand a stranger the assistant's role, and every teacher
gets an account from ``sampan hub`` (never from the sign-up form), with a password as strong as a learner's.

The authenticator runs against a real hub database (SQLite through JupyterHub's ORM), configured by the real
:func:`sampan.hub.config.configure`; ``sampan hub``'s decision reads that database as the hub does.
"""
from __future__ import annotations

import asyncio
import json
import logging

import pytest
from jupyterhub import orm
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker
from traitlets.config import Config

import sampan.cli.hub as cli_hub
from sampan.hub.auth import SampanAuthenticator, teachers_without_account
from sampan.hub.config import PASSWORD_ENV, PASSWORD_FILE_ENV, HubSettings, configure

GOOD = "river-boat-lantern-2718"


def _database(url: str):
    engine = create_engine(url)
    orm.Base.metadata.create_all(engine)
    return sessionmaker(bind=engine)()


def _login(auth: SampanAuthenticator, name: str, password: str):
    return asyncio.run(auth.authenticate(None, {"username": name, "password": password}))


def test_an_assistants_roster_name_waits_for_a_teachers_approval(tmp_path):
    """Whoever signed up first with an assistant's roster name got the assistant's role (the whole class's
    progress) at once; now that sign-up waits for a teacher at /hub/authorize. Students stay approved in advance."""
    roster = tmp_path / "class.csv"
    roster.write_text("username,role\nkim,teacher\nta.park,assistant\nlee,student\n")
    settings = HubSettings(hub_dir=tmp_path / "hub", teachers={"kim"}, roster={"kim": "teacher",
                           "ta.park": "assistant", "lee": "student"}, live="off", learner_user="root")
    c = Config()
    configure(c, settings)
    auth = SampanAuthenticator(db=_database("sqlite://"), config=c)
    assert auth.create_user("ta.park", "Mallory-pass-123") is not None  # the form takes it ...
    assert _login(auth, "ta.park", "Mallory-pass-123") is None  # ... but nobody logs in as the assistant yet
    assert auth.create_user("lee", GOOD) is not None and _login(auth, "lee", GOOD) == "lee"
    assert auth.create_user("kim", GOOD) is None  # a teacher's name is never taken at sign-up


def test_a_teacher_added_after_the_first_start_is_asked_for_and_gets_an_account(tmp_path, monkeypatch):
    """The second start with a new teacher asked nothing (jupyterhub.sqlite existed) and the sign-up form refuses
    teacher names: kim could never log in. Now `sampan hub` sees kim has no account, names kim, and asks."""
    hub = tmp_path / "hub"
    hub.mkdir()
    settings = HubSettings(hub_dir=hub, teachers={"teacher"})
    monkeypatch.setenv(PASSWORD_ENV, GOOD)  # first start
    SampanAuthenticator(db=_database(settings.hub_db_url), admin_users={"teacher"})
    settings.teachers = {"teacher", "kim"}
    monkeypatch.delenv(PASSWORD_ENV, raising=False)  # the hub took it. Second start: `--teacher teacher,kim`, no tty
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert teachers_without_account(settings.hub_db_url, settings.teachers) == ["kim"]
    with pytest.raises(ValueError, match=rf"Expected `{PASSWORD_ENV}` to be the password of the teacher account\(s\) "
                                         r"'kim', which the hub's database does not hold yet.*HINT: `read -s"):
        cli_hub._teacher_passwords(settings)
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)  # in a terminal: asked for kim only
    asked = []
    monkeypatch.setattr(cli_hub.getpass, "getpass", lambda prompt: asked.append(prompt) or "kims-own-passphrase")
    passwords = cli_hub._teacher_passwords(settings)
    assert passwords == {"kim": "kims-own-passphrase"} and asked == ["Password for the new teacher account 'kim': "]
    file = tmp_path / "handed-over"
    file.write_text(json.dumps(passwords))
    monkeypatch.setenv(PASSWORD_FILE_ENV, str(file))
    auth = SampanAuthenticator(db=_database(settings.hub_db_url), admin_users=settings.teachers)
    assert not file.exists()
    assert _login(auth, "kim", "kims-own-passphrase") == "kim" and _login(auth, "teacher", GOOD) == "teacher"
    assert cli_hub._teacher_passwords(settings) == {}  # the next restart asks nothing


def test_a_restart_on_another_database_reads_that_database(tmp_path, monkeypatch):
    """With SAMPAN_HUB_DB_URL (PostgreSQL in production) there is never a jupyterhub.sqlite in the hub folder:
    every restart without a terminal was refused as a first start. The decision reads the database the URL names."""
    other = tmp_path / "elsewhere.sqlite"
    settings = HubSettings(hub_dir=tmp_path / "hub", teachers={"teacher"}, db_url=f"sqlite:///{other}")
    monkeypatch.setenv(PASSWORD_ENV, GOOD)
    SampanAuthenticator(db=_database(settings.hub_db_url), admin_users={"teacher"})
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert not (settings.hub_dir / "jupyterhub.sqlite").exists()
    assert cli_hub._teacher_passwords(settings) == {}
    assert teachers_without_account(f"sqlite:///{tmp_path / 'none.sqlite'}", {"b", "a"}) == ["a", "b"]
    assert not (tmp_path / "none.sqlite").exists()  # a first start makes no database


def test_a_weak_teacher_password_is_refused_like_a_learners(tmp_path, monkeypatch):
    monkeypatch.setenv(PASSWORD_ENV, "x")
    with pytest.raises(ValueError, match=r"Expected `the password of the teacher 'teacher'` to be at least 8 "
                                         r"characters and not a common password.*\(1 characters, not shown\)"):
        cli_hub._teacher_passwords(HubSettings(hub_dir=tmp_path, teachers={"teacher"}))
    monkeypatch.setenv(PASSWORD_ENV, "password123")  # long enough, but on NativeAuthenticator's common list
    with pytest.raises(ValueError, match="not a common password"):
        SampanAuthenticator(db=_database("sqlite://"), admin_users={"teacher"})  # a hub started by hand


def test_a_teacher_without_account_or_password_is_named_in_the_hubs_log(caplog):
    log = logging.getLogger("test-hub-accounts")
    with caplog.at_level(logging.ERROR, logger=log.name):
        SampanAuthenticator(db=_database("sqlite://"), admin_users={"kim"}, log=log)
    assert "The teacher 'kim' has no account and no password was given" in caplog.text
