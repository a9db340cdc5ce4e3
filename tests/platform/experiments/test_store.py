"""Where runs go: the default SQLite store under the data directory, SAMPAN_TRACKING_URI, unwritable places."""
from __future__ import annotations

import nbformat
import pytest

from sampan.experiments import store


def test_default_store_is_a_sqlite_file_under_the_data_directory(data_home, monkeypatch):
    monkeypatch.delenv("SAMPAN_TRACKING_URI")
    uri = store.tracking_uri()
    assert uri == f"sqlite:///{(data_home / 'tracking' / 'mlflow.db').as_posix()}"
    assert store.artifact_root(uri) == (data_home / "tracking" / "artifacts").resolve().as_uri()


def test_tracking_uri_setting_wins(monkeypatch, tmp_path):
    monkeypatch.setenv("SAMPAN_TRACKING_URI", f"sqlite:///{tmp_path}/team.db")
    assert store.tracking_uri() == f"sqlite:///{tmp_path}/team.db"
    assert store.sqlite_path(store.tracking_uri()) == tmp_path / "team.db"
    assert store.sqlite_path("http://mlflow.example:5000") is None


def test_a_file_where_the_folder_should_be_is_a_clear_error(tmp_path, monkeypatch):
    blocker = tmp_path / "runs"
    blocker.write_text("not a folder")
    monkeypatch.setenv("SAMPAN_TRACKING_URI", f"sqlite:///{blocker}/sub/mlflow.db")
    with pytest.raises(store.StoreError, match=r"cannot be created .*HINT: set SAMPAN_TRACKING_URI"):
        store.check_writable()


def test_fit_refuses_an_unwritable_store_before_training(tmp_path, monkeypatch, blobs, mlp):
    import torch

    import sampan

    blocker = tmp_path / "runs"
    blocker.write_text("not a folder")
    monkeypatch.setenv("SAMPAN_TRACKING_URI", f"sqlite:///{blocker}/mlflow.db")
    net = mlp()
    model = sampan.Model(net)
    model.prepare(torch.optim.SGD(net.parameters(), 0.1), torch.nn.CrossEntropyLoss())
    with pytest.raises(store.StoreError, match=str(blocker)):
        model.fit(blobs[0], epochs=1, verbose=0)
    assert model.global_step == 0


def test_a_creator_that_dies_while_building_the_store_leaves_no_half_made_store(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from sampan.experiments import store

    class Died(Exception):
        pass

    db = tmp_path / "runs" / "mlflow.db"
    uri = f"sqlite:///{db.as_posix()}"
    real = MlflowClient.search_experiments

    def dies(self, *args, **kwargs):
        real(self, *args, **kwargs)  # the tables are being built...
        raise Died  # ...when the process is killed

    monkeypatch.setattr(MlflowClient, "search_experiments", dies)
    with pytest.raises(Died):
        store.client(uri)
    assert not db.exists() and len(list(db.parent.glob(".mlflow.db.*.new"))) == 1
    monkeypatch.setattr(MlflowClient, "search_experiments", real)
    client = store.client(uri)  # the next process builds it again, cleanly
    assert db.exists() and not list(db.parent.glob(".mlflow.db.*.new"))
    assert [e.name for e in client.search_experiments()] == ["Default"]


def test_runs_go_to_the_store_file_there_is_now_after_it_was_replaced_or_deleted(tmp_path):
    # The recording service is a long-lived process that keeps each store open; a learner who restores the store from
    # a copy, or deletes it to start afresh, must find the next runs in the file that is there now (its cached
    # connections wrote to the old file, or failed: "attempt to write a readonly database").
    import shutil
    import sqlite3

    from sampan.experiments import recorder

    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db.as_posix()}"

    def names() -> list[str]:
        with sqlite3.connect(db) as conn:
            return sorted(name for (name,) in conn.execute("SELECT name FROM runs"))

    recorder.start_run(uri, "sampan", "before the copy", {}, {})
    shutil.copy(db, tmp_path / "copy.db")
    recorder.start_run(uri, "sampan", "after the copy", {}, {})
    assert names() == ["after the copy", "before the copy"]
    (tmp_path / "copy.db").replace(db)  # restored from the copy
    recorder.start_run(uri, "sampan", "after the restore", {}, {})
    assert names() == ["after the restore", "before the copy"]
    db.unlink()  # deleted
    recorder.start_run(uri, "sampan", "in a new store", {}, {})
    assert names() == ["in a new store"]


@pytest.mark.parametrize("uri", ["bogus:///x", "s3://bucket/runs", "ftp://host/runs"])
def test_a_tracking_uri_mlflow_cannot_use_is_named_before_anything_runs(uri, monkeypatch, capsys, tmp_path):
    from sampan.cli import main

    monkeypatch.setenv("SAMPAN_TRACKING_URI", uri)
    message = r"Expected `\$SAMPAN_TRACKING_URI` to be an MLflow tracking URI.*Received: \$SAMPAN_TRACKING_URI="
    with pytest.raises(store.StoreError, match=message + r".*HINT: set SAMPAN_TRACKING_URI=sqlite:///"):
        store.check_writable()
    notebook = tmp_path / "nb.ipynb"
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]})]
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": kernel}), notebook)
    assert main(["job", "run", str(notebook)]) == 2
    assert f"Received: $SAMPAN_TRACKING_URI={uri!r}" in capsys.readouterr().err
    assert main(["sweep", str(notebook), "-p", "x=1,2"]) == 2
    assert f"Received: $SAMPAN_TRACKING_URI={uri!r}" in capsys.readouterr().err


@pytest.mark.parametrize("uri", ["sqlite:///{tmp}/x/mlflow.db", "file://{tmp}/mlruns", "{tmp}/mlruns", "mlruns",
                                 "http://127.0.0.1:5000", "https://mlflow.example.org",
                                 "postgresql+psycopg2://u@h/db", "mysql://u@h/db"])
def test_tracking_uris_mlflow_uses_are_accepted(uri, monkeypatch, tmp_path):
    # the test's own folder: tmp_path is absolute, so sqlite:///{tmp} has the four slashes of an absolute path
    # (with three, the database and its folder were made in the working directory: the checkout)
    uri = uri.replace("{tmp}", str(tmp_path))
    monkeypatch.setenv("SAMPAN_TRACKING_URI", uri)
    assert store.check_writable() == uri
    if uri.startswith("sqlite:"):
        assert (tmp_path / "x").is_dir()  # the database's folder, made where the URI says


def test_listing_a_mistyped_experiment_names_the_known_ones_and_creates_nothing(fresh_store):
    import sampan.experiments as ex
    from sampan.experiments.compare import list_runs

    ex.client().create_run(ex.store.experiment_id("sampan-typo-check"))  # a writer creates its experiment
    before = sorted(e.name for e in ex.client().search_experiments())
    with pytest.raises(ValueError, match=r"Expected `experiment` to be the name of an experiment in the store. "
                                         r"Received: experiment='sampan-typo-chek'.*known experiments: .*"
                                         r"sampan-typo-check"):
        list_runs(experiment="sampan-typo-chek")
    with pytest.raises(ValueError, match="Received: experiment='sampan-typo-chek'"):
        ex.search_runs(experiment="sampan-typo-chek")
    assert list_runs(experiment="sampan-typo-chek", missing_ok=True) == []
    assert ex.search_runs() == []  # the default experiment ($SAMPAN_EXPERIMENT here) has no runs yet: no error
    assert sorted(e.name for e in ex.client().search_experiments()) == before
    assert len(ex.search_runs(experiment="sampan-typo-check")) == 1
