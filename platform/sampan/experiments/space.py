"""Sweep search spaces: ``lr=1e-4:1e-1:log``, ``dropout=0:0.5``, ``layers=1:4``, ``batch_size=32,64``."""
from __future__ import annotations

from typing import Any

from sampan.errors import bad_argument

FORMS = ("LOW:HIGH (uniform; ints give ints), LOW:HIGH:log (log-uniform), LOW:HIGH:STEP (a grid step), "
         "A,B,C (a choice) or a Python list")


def _number(text: str) -> int | float:
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        return float(text)


def parse_value(text: str) -> Any:
    """``"20"`` -> 20, ``"1e-3"`` -> 0.001, ``"true"`` -> True, else the text."""
    text = text.strip()
    try:
        return _number(text)
    except ValueError:
        return {"true": True, "false": False, "none": None}.get(text.lower(), text)


def parse_spec(name: str, spec: Any) -> dict:
    """One parameter's range as ``{"kind": "float"|"int"|"choice", ...}``.

    Example:
        >>> from sampan.experiments.space import parse_spec
        >>> parse_spec("lr", "1e-4:1e-1:log")
        {'kind': 'float', 'low': 0.0001, 'high': 0.1, 'log': True, 'step': None}
        >>> parse_spec("batch_size", "32,64")
        {'kind': 'choice', 'choices': [32, 64]}
    """
    if isinstance(spec, (list, tuple)) and spec:
        return {"kind": "choice", "choices": list(spec)}
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(_bad(name, spec))
    if ":" not in spec:
        choices = [parse_value(v) for v in spec.split(",") if v.strip()]
        if not choices:
            raise ValueError(_bad(name, spec, "a choice needs at least one value"))
        return {"kind": "choice", "choices": choices}
    parts = spec.split(":")
    try:
        if len(parts) not in (2, 3):
            raise ValueError(spec)
        low, high = _number(parts[0]), _number(parts[1])
        log = len(parts) == 3 and parts[2].strip().lower() == "log"
        step = _number(parts[2]) if len(parts) == 3 and not log else None
    except ValueError:
        raise ValueError(_bad(name, spec)) from None
    if not low < high or (log and low <= 0) or (step is not None and step <= 0):
        raise ValueError(_bad(name, spec, "LOW < HIGH, LOW > 0 for :log, STEP > 0"))
    is_int = all(isinstance(v, int) for v in (low, high, step if step is not None else 1))
    return {"kind": "int" if is_int else "float", "low": low, "high": high, "log": log, "step": step}


def _bad(name: str, spec: Any, rule: str | None = None) -> str:
    expected = f"a sweep range of one of these forms: {FORMS}" + (f" ({rule})" if rule else "")
    return bad_argument(name, spec, expected,
                        f"write e.g. -p {name}=1e-4:1e-1:log or -p {name}=32,64")


def parse_space(space: dict[str, Any]) -> dict[str, dict]:
    """Every parameter of ``space`` parsed by :func:`parse_spec`."""
    if not isinstance(space, dict) or not space:
        raise ValueError(bad_argument("space", space, "a non-empty dict of parameter name -> range",
                                      "write {'lr': '1e-4:1e-1:log', 'batch_size': [32, 64]}"))
    return {name: parse_spec(name, spec) for name, spec in space.items()}


def parse_assignments(items: list[str], argument: str = "-p") -> dict[str, str]:
    """``["lr=1e-3:1e-1:log", "batch_size=32,64"]`` -> ``{"lr": "1e-3:1e-1:log", "batch_size": "32,64"}``."""
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(bad_argument(argument, item, "KEY=VALUE", f"write {argument} lr=1e-3"))
        if name.strip() in out and out[name.strip()] != value.strip():  # which one was meant? (the last won, silently)
            raise ValueError(bad_argument(argument, item, f"one value per parameter ({name.strip()} is given "
                                          f"{out[name.strip()]!r} already)", "keep only the one you mean"))
        out[name.strip()] = value.strip()
    return out


def suggest(trial: Any, space: dict[str, dict]) -> dict[str, Any]:
    """Draws one value per parameter from an Optuna trial."""
    values = {}
    for name, p in space.items():
        if p["kind"] == "choice":
            values[name] = trial.suggest_categorical(name, p["choices"])
        elif p["kind"] == "int":
            values[name] = trial.suggest_int(name, p["low"], p["high"], step=p["step"] or 1, log=p["log"])
        else:
            values[name] = trial.suggest_float(name, p["low"], p["high"], step=p["step"], log=p["log"])
    return values
