"""Builders for the attacks in tests/security/: each test makes the malicious file a stranger could share."""
from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path


class Payload:
    """A pickle that runs a shell command when unpickled (what an attacker puts in a shared file)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"echo pwned > '{self.marker}'",)


def rewrite_zip(file: Path, replace: dict[str, bytes]) -> None:
    """Rewrites the zip archive ``file`` with some members (named without the archive's root folder) replaced
    or added."""
    with zipfile.ZipFile(file) as src:
        root = src.namelist()[0].split("/", 1)[0]
        members = {info.filename.split("/", 1)[1]: src.read(info) for info in src.infolist()}
    members.update(replace)
    with zipfile.ZipFile(file, "w", zipfile.ZIP_STORED) as out:
        for name, data in members.items():
            out.writestr(f"{root}/{name}", data)


def reseal(prefix: Path, fmt: str = "pt2") -> None:
    """Recomputes the sha256 in ``prefix.meta.json``, as the attacker ships their own meta file."""
    meta_file = Path(f"{prefix}.meta.json")
    meta = json.loads(meta_file.read_text())
    entry = meta["artifacts"][fmt]
    entry["sha256"] = hashlib.sha256((prefix.parent / entry["file"]).read_bytes()).hexdigest()
    meta_file.write_text(json.dumps(meta))
