"""Atomic writes give files the mode open() would (another account's Jupyter reads a lab setting), and 0600 to
secrets from their first byte."""
import os
import stat
import subprocess
import sys

from sampan.utils.io import atomic_path, atomic_write_json, atomic_write_text


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_files_get_the_mode_open_gives_them(tmp_path):
    previous = os.umask(0o022)
    try:
        plain = tmp_path / "plain.txt"
        plain.write_text("x")
        atomic_write_json(tmp_path / "settings.json", {"a": 1})
        assert mode(tmp_path / "settings.json") == mode(plain) == 0o644
        os.umask(0o077)
        atomic_write_text(tmp_path / "strict.txt", "y")
        assert mode(tmp_path / "strict.txt") == 0o600  # the user's own umask still rules
    finally:
        os.umask(previous)


def test_a_private_file_is_never_readable_by_others(tmp_path):
    previous = os.umask(0o022)
    try:
        with atomic_path(tmp_path / "secret", private=True) as tmp:
            tmp.write_text("token")
            assert mode(tmp) == 0o600  # while it is written, too
        assert mode(tmp_path / "secret") == 0o600
        atomic_write_text(tmp_path / "password", "pw", private=True)
        assert mode(tmp_path / "password") == 0o600
    finally:
        os.umask(previous)


def test_the_umask_is_read_without_being_changed():
    code = ("import os, threading; from sampan.utils.io import _umask; os.umask(0o027); "
            "print(oct(_umask()), oct(os.umask(0o027)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0o27", "0o27"]
