"""``sampan path list | run | site``: the learning path with your progress, its headless runner, its HTML site.

Examples:
    sampan path list
    sampan path list --manifest course/path.yaml   # --manifest goes before or after the action
    sampan path index        # after editing path.yaml
    sampan path run --stage beginner --quick
    sampan path run --lesson first_model --output runs/ --keep-going
    sampan path site --from runs/<timestamp>   # the executed lessons as static HTML, in <run>/site/
"""
from __future__ import annotations

import argparse
import sys

from sampan.cli._args import add_lang_argument, chosen_language, positive_seconds


_MANIFEST_HELP = "the path.yaml to use (default notebooks/path.yaml)"


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("path", help="list or run the learning path", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--manifest", default=None, help=_MANIFEST_HELP)
    # every action takes --manifest too; SUPPRESS keeps an action's parser from overwriting one given before it
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--manifest", default=argparse.SUPPRESS, help=_MANIFEST_HELP)
    sub = parser.add_subparsers(dest="path_command", metavar="ACTION")
    listing = sub.add_parser("list", help="show stages, lessons, estimated time and your progress", parents=[common])
    add_lang_argument(listing)
    sub.add_parser("index", help="rewrite the lesson listing in notebooks/index.ipynb from path.yaml",
                   parents=[common])
    run = sub.add_parser("run", help="execute lessons with papermill and write report.html / report.json",
                         parents=[common])
    run.add_argument("--stage", default=None, help="only this stage (beginner, intermediate, advanced)")
    run.add_argument("--lesson", action="append", default=None, help="only this lesson (repeatable)")
    run.add_argument("--quick", action="store_true", help="QUICK=True: small data, few epochs, quick ranges")
    run.add_argument("--output", default=None, help="folder receiving the new <timestamp>/ run folder (default ./runs)")
    run.add_argument("--keep-going", action="store_true", help="run the remaining lessons after a failure")
    run.add_argument("--timeout", type=positive_seconds, default=None,
                     help="seconds per lesson (default from path.yaml)")
    run.add_argument("--seed", type=int, default=None, help="SEED injected into every lesson")
    run.add_argument("--data-dir", default=None, help="DATA_DIR / SAMPAN_DATA for the lessons")
    run.add_argument("--kernel", default=None, help="kernel to run the lessons in (default: the one they name)")
    add_lang_argument(run)
    site = sub.add_parser("site", help="build a static HTML site of the executed lessons (index, one page each)",
                          description="The executed lessons as static HTML (no server, no JavaScript needed). "
                                      "With --from, the site is in the run's language (--lang must match it).",
                          parents=[common])
    site.add_argument("--from", dest="from_run", default=None, metavar="RUN_DIR",
                      help="a folder written by `sampan path run` (default: run the path in quick mode first)")
    site.add_argument("--out", default=None, metavar="DIR", help="the site's folder (default RUN_DIR/site)")
    add_lang_argument(site)


def run(args) -> int:
    from sampan.errors import SampanError
    from sampan.path import PathManifestError, RunInterrupted

    try:
        if args.path_command == "list":
            return _list(args)
        if args.path_command == "run":
            return _run(args)
        if args.path_command == "index":
            return _index(args)
        if args.path_command == "site":
            return _site(args)
    except (PathManifestError, SampanError, ValueError, FileNotFoundError) as exc:
        print(f"sampan path: {exc}", file=sys.stderr)
        return 2
    except RunInterrupted as exc:  # Ctrl-C: the report says which lesson was running; no traceback
        print(f"sampan path: interrupted; report: {exc.report.html_path}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("sampan path: interrupted", file=sys.stderr)
        return 130
    print("usage: sampan path {list,run,index,site} [options]; see `sampan path run --help`", file=sys.stderr)
    return 2


def _list(args) -> int:
    from sampan.path import load_path, load_progress

    from sampan.path.lang import lesson_title
    from sampan.path.progress import damaged_progress
    from sampan.path.report import message

    lang = chosen_language(args)
    path = load_path(args.manifest)
    progress = load_progress()
    for problem in damaged_progress():
        print(f"sampan path: warning: {problem}", file=sys.stderr)
    total = len(path.lessons)
    done = sum(1 for x in path.lessons if progress.get(x.id, {}).get("status") == "passed")
    print(message("list_header", lang, title=path.text("title", lang), done=done, total=total, file=path.file))
    for stage in path.stages:
        minutes = sum(x.minutes["full"] for x in stage.lessons)
        print(f"\n{stage.text('title', lang)}  [{stage.id}]  {message('stage_minutes', lang, minutes=minutes)}")
        if not stage.lessons:
            print("    " + message("no_lessons", lang))
        for lesson in stage.lessons:
            entry = progress.get(lesson.id, {})
            mark = {"passed": "✔", "failed": "✘"}.get(entry.get("status"), "·")
            after = message("list_sep", lang).join(lesson.requires)  # ids: what --lesson takes
            req = "  " + message("after", lang, lessons=after) if lesson.requires else ""
            minutes = message("lesson_minutes", lang, minutes=lesson.minutes["full"])
            print(f"  {mark} {lesson.id:32s} {minutes}  {lesson.relative_notebook(path.root)}"
                  f"  {lesson_title(lesson, lang)}{req}")
    return 0


def _run(args) -> int:
    from sampan.path import run as run_path
    from sampan.path.report import message

    lang = chosen_language(args)
    report = run_path(stage=args.stage, lesson=args.lesson, quick=args.quick, output_dir=args.output,
                      keep_going=args.keep_going, manifest=args.manifest, data_dir=args.data_dir, seed=args.seed,
                      timeout=args.timeout, kernel_name=args.kernel, progress=True, lang=lang)
    for result in report.lessons:
        mark = {"passed": "✔", "failed": "✘", "skipped": "-", "not_run": "·"}[result.status]
        status = message(result.status, lang)
        line = f"{mark} {result.lesson:32s} {status:8s} {result.duration_s:7.1f} s"
        print(line + (f"  {result.reason}" if result.reason and result.status != "passed" else ""))
    print(message("report", lang, path=report.html_path))
    return 0 if report.ok else 1


def _index(args) -> int:
    from pathlib import Path

    from sampan.path import default_manifest, load_path
    from sampan.path.index import sync_index_notebook

    manifest = (Path(args.manifest) if args.manifest else default_manifest()).resolve()
    load_path(manifest, check_files=False)  # a missing or broken manifest is named, not the index beside it
    target = manifest.parent / "index.ipynb"
    print(f"{target}: {'updated' if sync_index_notebook(target, manifest) else 'already in sync'}")
    return 0


def _site(args) -> int:
    from sampan.path.site import build_site

    # with --from, the language is the run's unless --lang says otherwise (and must then match it)
    lang = args.lang if args.from_run is not None else chosen_language(args)
    site = build_site(args.from_run, out=args.out, lang=lang, manifest=args.manifest, progress=True)
    print(f"{len(site.pages)} lesson pages from {site.run_dir}")
    if site.missing:
        print(f"not executed in that run (listed without a page): {', '.join(site.missing)}")
    if site.failed:
        print(f"failed in that run (their pages show where): {', '.join(site.failed)}")
    print(f"site: {site.index}")
    return 1 if site.failed and args.from_run is None else 0  # the run made here failed a lesson
