"""Where runs are kept: an MLflow tracking store, a SQLite file under the data directory by default.

``SAMPAN_TRACKING_URI`` points elsewhere (any MLflow tracking URI: another SQLite file, a
``postgresql://`` database, an ``http://`` tracking server for a class). ``mlflow ui
--backend-store-uri <uri>`` shows the same runs.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from sampan.errors import SampanError, bad_argument
from sampan.utils.io import file_lock

TRACKING_ENV = "SAMPAN_TRACKING_URI"
EXPERIMENT_ENV = "SAMPAN_EXPERIMENT"
LESSON_ENV = "SAMPAN_LESSON"
NOTEBOOK_ENV = "SAMPAN_NOTEBOOK"
DEFAULT_EXPERIMENT = "sampan"
# MLflow tracking URI schemes Sampan uses: a local folder (a path or file://), SQLite, a database, a tracking server
SCHEMES = ("file", "sqlite", "postgresql", "mysql", "http", "https")


class StoreError(SampanError):
    """The tracking store cannot be opened or written; the message names the folder or the setting."""


def tracking_dir() -> Path:
    """The default store's folder: ``$SAMPAN_DATA/tracking`` (``~/.cache/sampan/tracking``)."""
    from sampan.utils.io import data_home

    return data_home() / "tracking"


def tracking_uri() -> str:
    """``$SAMPAN_TRACKING_URI`` or ``sqlite:///<data dir>/tracking/mlflow.db``.

    Example:
        >>> from sampan.experiments import tracking_uri
        >>> tracking_uri().startswith(("sqlite:", "http", "postgresql", "mysql", "file:"))
        True
    """
    uri = os.environ.get(TRACKING_ENV, "").strip()
    if uri:
        return uri
    return f"sqlite:///{(tracking_dir() / 'mlflow.db').as_posix()}"


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI; ``None`` for other stores."""
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri[len("sqlite:///"):].split("?", 1)[0])


def artifact_root(uri: str) -> str | None:
    """Artifacts of a SQLite store go in an ``artifacts/`` folder beside the database; others use the server's."""
    db = sqlite_path(uri)
    return (db.parent / "artifacts").resolve().as_uri() if db is not None else None


def check_writable(uri: str | None = None) -> str:
    """Raises :class:`StoreError` when the URI is not one MLflow can track to (an unknown scheme, say) or a local
    store's folder cannot be created or written.

    Only looks at the URI and the file system (no MLflow import), so ``fit`` can call it on every run.

    Returns:
        The URI checked.
    """
    uri = uri or tracking_uri()
    _check_scheme(uri)
    db = sqlite_path(uri)
    if db is None:
        return uri
    folder = db.parent
    source = f"${TRACKING_ENV}={uri}" if os.environ.get(TRACKING_ENV) else "the data directory ($SAMPAN_DATA)"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(_unwritable(folder, source, f"it cannot be created ({exc.strerror})")) from exc
    if not os.access(folder, os.W_OK | os.X_OK) or (db.exists() and not os.access(db, os.W_OK)):
        raise StoreError(_unwritable(folder, source, "it is not writable"))
    return uri


def _check_scheme(uri: str) -> None:
    """A plain path, or a URI whose scheme is one of :data:`SCHEMES` (a database's ``+driver`` allowed)."""
    from urllib.parse import urlsplit

    scheme = urlsplit(uri).scheme.lower()
    if not scheme or len(scheme) == 1 or scheme.split("+", 1)[0] in SCHEMES:  # one letter: a Windows drive
        return
    name = f"${TRACKING_ENV}" if os.environ.get(TRACKING_ENV, "").strip() == uri else "uri"
    raise StoreError(bad_argument(
        name, uri, f"an MLflow tracking URI: a folder path, or one starting with {', '.join(s + ':' for s in SCHEMES)}",
        f"set {TRACKING_ENV}=sqlite:///$HOME/sampan-runs/mlflow.db (or http://host:5000 for a tracking server), "
        f"or unset it to use the default store under $SAMPAN_DATA"))


def _unwritable(folder: Path, source: str, why: str) -> str:
    return (f"The experiment store folder {folder} (from {source}) cannot hold runs: {why}. HINT: set "
            f"{TRACKING_ENV} to a writable location, e.g. {TRACKING_ENV}=sqlite:///$HOME/sampan-runs/mlflow.db, "
            f"or turn recording off with SAMPAN_TRACKING=0.")


_CLIENTS_KEPT = 8
_clients: dict[str, tuple[Any, tuple[int, int] | None]] = {}  # uri: (client, the SQLite file it opened)
_clients_lock = threading.Lock()


def _file_id(db: Path) -> tuple[int, int] | None:
    try:
        info = db.stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _client(uri: str):
    """The cached client of ``uri``; made again when its SQLite file was deleted or replaced since it was opened
    (a learner resetting the store while the recording service, a long-lived process, kept it open)."""
    db = sqlite_path(uri)
    with _clients_lock:
        cached = _clients.pop(uri, None)
        if cached is not None and (db is None or cached[1] == _file_id(db)):
            _clients[uri] = cached  # the most recent last
            return cached[0]
        if cached is not None:
            _forget_engine(db)
        client = _open(uri, db)
        _clients[uri] = (client, None if db is None else _file_id(db))
        while len(_clients) > _CLIENTS_KEPT:
            del _clients[next(iter(_clients))]
        return client


def _forget_engine(db: Path) -> None:
    """Drops what MLflow 3 keeps of the SQLite file ``db``: its engine (``SqlAlchemyStore._engine_map``) and the
    stores built on it (the store registry's cache). Their connections still point at the old file, and a write
    through them fails ("attempt to write a readonly database") or goes to a file that no longer has a name.
    (``test_runs_go_to_the_store_file_there_is_now_after_it_was_replaced_or_deleted`` fails if MLflow moves them.)"""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.tracking._tracking_service import utils

    engines = getattr(SqlAlchemyStore, "_engine_map", {})
    with getattr(SqlAlchemyStore, "_engine_map_lock", threading.Lock()):
        for key in [k for k in engines if sqlite_path(k) == db]:
            engines.pop(key).dispose()
    stores = getattr(type(getattr(utils, "_tracking_store_registry", None)), "_get_store_with_resolved_uri", None)
    if hasattr(stores, "cache_clear"):
        stores.cache_clear()  # every store; the others are built again on their cached engines


def _open(uri: str, db: Path | None):
    from mlflow.tracking import MlflowClient

    if db is None:
        return MlflowClient(tracking_uri=uri)
    with file_lock(db.with_name(f".{db.name}.lock")):  # two processes creating one SQLite store race otherwise
        if not db.exists():
            _create(db)
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)  # opens the store: upgrades its tables if MLflow is newer
    return client


def _create(db: Path) -> None:
    """Creates a new SQLite store beside ``db`` and renames it into place, so a process killed while
    MLflow builds the tables (seconds of migrations) leaves no half-made store behind. Called under the lock."""
    from mlflow.tracking import MlflowClient

    for stale in db.parent.glob(f".{db.name}.*.new"):  # left by a creator that was killed
        stale.unlink(missing_ok=True)
    fresh = db.with_name(f".{db.name}.{os.getpid()}-{os.urandom(4).hex()}.new")  # new each try: MLflow caches stores
    MlflowClient(tracking_uri=f"sqlite:///{fresh.as_posix()}").search_experiments(max_results=1)
    os.replace(fresh, db)


def client(uri: str | None = None):
    """The ``mlflow.tracking.MlflowClient`` of the store (created once per process and URI).

    Example:
        >>> from sampan.experiments import client
        >>> from sampan.experiments.store import experiment_id
        >>> runs = client().search_runs([experiment_id()])  # doctest: +SKIP
    """
    return _client(check_writable(uri))


def experiment_id(name: str | None = None, uri: str | None = None) -> str:
    """The id of experiment ``name`` (``$SAMPAN_EXPERIMENT`` or ``"sampan"``), created when absent.

    Two processes creating it at once both get the same id.
    """
    from mlflow.exceptions import MlflowException

    name = name or os.environ.get(EXPERIMENT_ENV) or DEFAULT_EXPERIMENT
    uri = uri or tracking_uri()
    c = client(uri)
    found = c.get_experiment_by_name(name)
    if found is not None:
        return _own_artifacts(found, uri)
    try:
        return c.create_experiment(name, artifact_location=artifact_root(uri))
    except MlflowException:  # another worker created it in between
        found = c.get_experiment_by_name(name)
        if found is None:
            raise
        return found.experiment_id


def _own_artifacts(experiment: Any, uri: str) -> str:
    """``experiment``'s id, unless a SQLite store keeps its artifacts outside the store's folder: a store from
    someone else could name their own server or any folder, and the learner's checkpoints (and MLflow token) would
    go there. Tracking servers choose their own artifact stores."""
    db = sqlite_path(uri)
    if db is None:
        return experiment.experiment_id
    location = str(experiment.artifact_location or "")
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(location)
    local = Path(unquote(parts.path)) if parts.scheme in ("", "file") and not parts.netloc else None
    if local is not None and local.is_absolute() and local.resolve().is_relative_to(db.parent.resolve()):
        return experiment.experiment_id
    raise StoreError(
        f"The experiment {experiment.name!r} of the store {db} keeps its artifacts at {location!r}, outside the "
        f"store's folder {str(db.parent)!r}: checkpoints recorded there would be sent to that place (a store from "
        f"someone else can name its author's server). HINT: record into a store of your own ({TRACKING_ENV}="
        f"sqlite:///<a new file>), or under another experiment name ({EXPERIMENT_ENV}=<name>)")


def search_runs(filter_string: str = "", *, experiment: str | None = None, max_results: int = 1000,
                order_by: list[str] | None = None, uri: str | None = None, missing_ok: bool = False) -> list[Any]:
    """Runs of an experiment as ``mlflow.entities.Run`` objects, newest first. Only reads: an experiment that
    does not exist is not created.

    Args:
        filter_string: MLflow's search syntax, e.g. ``"tags.sampan.lesson = 'experiments'"``.
        experiment: experiment name (default ``$SAMPAN_EXPERIMENT`` or ``"sampan"``, which has no runs
            until a fit records one); a name that does not exist is an error naming the known ones.
        max_results: at most this many runs.
        missing_ok: no runs, not an error, when ``experiment`` does not exist (yet).

    Example:
        >>> from sampan.experiments import search_runs
        >>> [r.data.metrics["eval_acc"] for r in search_runs("metrics.eval_acc > 0.9")]  # doctest: +SKIP
    """
    from sampan.experiments.recorder import flush

    order_by = _check_search_arguments(filter_string, max_results, order_by)
    flush()
    c = client(uri)
    found = c.get_experiment_by_name(experiment or os.environ.get(EXPERIMENT_ENV) or DEFAULT_EXPERIMENT)
    if found is None:
        if missing_ok or experiment is None:
            return []
        known = ", ".join(sorted(e.name for e in c.search_experiments(max_results=50))) or "none yet"
        raise ValueError(bad_argument("experiment", experiment, "the name of an experiment in the store",
                                      f"known experiments: {known}; check the spelling, or pass missing_ok=True "
                                      f"for one that has no runs yet"))
    from mlflow.exceptions import MlflowException

    try:
        return list(c.search_runs([found.experiment_id], filter_string, max_results=max_results,
                                  order_by=order_by or ["attributes.start_time DESC"]))
    except MlflowException as exc:
        if exc.error_code != "INVALID_PARAMETER_VALUE":
            raise
        # still an MlflowException (callers tell a filter MLflow cannot search by its type), now naming the argument
        raise MlflowException(bad_argument(
            "filter_string", filter_string, f"a filter MLflow can search ({str(exc).strip()})",
            "compare metrics with < <= > >= = !=, params and tags only with = != LIKE and quoted values, "
            "e.g. \"metrics.eval_acc > 0.9 and params.optimizer = 'Adam'\"; write a dotted tag name in "
            "backticks: tags.`sampan.lesson` = 'experiments'"), error_code=exc.error_code) from None


_SEARCH_EXAMPLE = "e.g. \"metrics.eval_acc > 0.9\", or \"\" for every run"


def _check_search_arguments(filter_string: Any, max_results: Any, order_by: Any) -> list[str] | None:
    """Refuses, naming them, search arguments of the wrong type (MLflow would fail on them with an unrelated
    message: an ``order_by`` string is read letter by letter)."""
    if not isinstance(filter_string, str):
        raise ValueError(bad_argument("filter_string", filter_string, "a string in MLflow's search syntax",
                                      _SEARCH_EXAMPLE))
    if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
        raise ValueError(bad_argument("max_results", max_results, "an int >= 1", "pass max_results=100"))
    if order_by is not None and (isinstance(order_by, str) or not all(isinstance(o, str) for o in order_by)):
        raise ValueError(bad_argument("order_by", order_by, "a list of strings, or None for newest first",
                                      "write order_by=[\"metrics.eval_acc DESC\"] (a list, even for one key)"))
    return order_by


def quoted(value: str) -> str:
    """``value`` as a string literal in an MLflow filter (``tags.x = <literal>``); MLflow's parser has no escapes,
    so a value holding a quote is refused.

    Example:
        >>> from sampan.experiments.store import quoted
        >>> quoted("sweep-1")
        "'sweep-1'"
    """
    if not isinstance(value, str) or "'" in value or '"' in value or "\\" in value:
        raise ValueError(bad_argument("value", value, "a string without quotes or backslashes, to match in a filter"))
    return f"'{value}'"
