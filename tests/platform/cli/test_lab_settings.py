"""`sampan lab` switches off JupyterLab's "notified about official Jupyter news?" question for learners."""
import json
import sys
from pathlib import Path

from jupyterlab.labapp import LabApp
from jupyterlab_server.settings_utils import get_settings

from sampan.cli.lab import install_lab_settings

NOTIFICATION = "@jupyterlab/apputils-extension:notification"


def _effective(prefix: Path, user: Path) -> dict:
    """Each notification setting as JupyterLab's settings API serves it: schema default, overrides, user."""
    settings, _ = get_settings(str(prefix / "share" / "jupyter" / "lab" / "settings"), LabApp().schemas_dir,
                               str(user), schema_name=NOTIFICATION)
    defaults = {k: v.get("default") for k, v in settings["schema"]["properties"].items()}
    return {**defaults, **settings["settings"]}


def test_lab_reads_the_settings_where_sampan_lab_writes_them():
    assert Path(LabApp().app_settings_dir).resolve() == Path(sys.prefix, "share", "jupyter", "lab", "settings").resolve()


def test_news_question_and_update_check_are_off_and_the_learner_still_decides(tmp_path):
    assert _effective(tmp_path, tmp_path / "user")["fetchNews"] == "none"  # JupyterLab's own default: it asks
    own = tmp_path / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    own.parent.mkdir(parents=True)
    own.write_text(json.dumps({"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"}}))
    path = install_lab_settings(tmp_path)
    assert install_lab_settings(tmp_path) == path and path.parent.name == "overrides.d"
    effective = _effective(tmp_path, tmp_path / "user")
    assert effective["fetchNews"] == "false" and effective["checkForUpdates"] is False
    assert json.loads(own.read_text()) == {"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"}}
    mine = tmp_path / "user" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    mine.parent.mkdir(parents=True)
    mine.write_text('{"fetchNews": "true"}')  # a learner who wants the news gets them
    assert _effective(tmp_path, tmp_path / "user")["fetchNews"] == "true"
