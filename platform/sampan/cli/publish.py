"""``sampan publish``: a learner's own notebook as a Voilà dashboard in their gallery.

The notebook must lie inside your folder (``$SAMPAN_LEARNER_HOME``, else your home
directory). ``--serve`` starts Voilà on the gallery (127.0.0.1 with a token from
``$SAMPAN_GALLERY_TOKEN`` or a random one, sources stripped, no tracebacks in the
browser, preheated kernels); the gallery page shows a thumbnail per dashboard.

Examples:
    sampan publish apps/digits.ipynb
    sampan publish apps/digits.ipynb --name digits --no-thumbnail
    sampan publish 手写数字识别.ipynb --name digits --title "手写数字识别 (LeNet)"
    sampan publish --list
    sampan publish --remove digits
    sampan publish --serve --port 8870
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys

from sampan.cli._args import port as port_type


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("publish", help="publish your notebook as a Voila dashboard in your gallery",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook", nargs="?", default=None, help="the .ipynb to publish (inside your folder)")
    parser.add_argument("--name", default=None, help="dashboard name (default: the notebook's file name)")
    parser.add_argument("--title", default=None,
                        help="what the galleries show, any language (default: the notebook's file name)")
    parser.add_argument("--no-thumbnail", action="store_true", help="skip the headless-Chromium thumbnail")
    parser.add_argument("--list", action="store_true", help="list the published dashboards")
    parser.add_argument("--remove", metavar="NAME", default=None, help="remove a dashboard from the gallery")
    parser.add_argument("--serve", action="store_true", help="serve the gallery with Voila on 127.0.0.1")
    parser.add_argument("--port", type=port_type, default=8867, help="port for --serve (another free port when taken)")
    parser.add_argument("--dry-run", action="store_true", help="with --serve: print the command instead")


def run(args) -> int:
    from sampan.errors import UnsafeFileError
    from sampan.hub import gallery

    try:
        if args.remove:
            gallery.remove(args.remove)
            print(f"Removed {args.remove} from the gallery")
        elif args.notebook:
            entry = gallery.publish(args.notebook, name=args.name, title=args.title, thumbnail=not args.no_thumbnail)
            print(f"Published {entry.name} (from {entry.source}); "
                  f"thumbnail: {entry.thumbnail or 'placeholder'}. Serve the gallery: sampan publish --serve")
    except (FileNotFoundError, ValueError, KeyError, UnsafeFileError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) else exc
        print(f"sampan publish: {message}", file=sys.stderr)
        return 2
    if args.list or not (args.notebook or args.remove or args.serve):
        entries = gallery.list_published()
        print("\n".join(f"{e.name}\t{e.published_at}\t{e.source}\t{e.title}" for e in entries)
              or "(nothing published yet)")
    if args.serve:
        return _serve(args)
    return 0


def _serve(args) -> int:
    from sampan.cli._servers import ensure_kernel, new_token, server_env
    from sampan.utils.net import server_port
    from sampan.hub import gallery

    gallery.ensure_index()
    port = server_port(args.port, program="sampan publish")
    cmd = gallery.voila_command(port=port)
    if args.dry_run:
        print(shlex.join(cmd))  # a line to paste into a shell
        return 0
    ensure_kernel()
    token = new_token("SAMPAN_GALLERY_TOKEN")
    print(f"Sampan gallery: http://127.0.0.1:{port}/voila/render/{gallery.INDEX}?token={token}", flush=True)
    sys.stderr.flush()
    os.execve(sys.executable, cmd, server_env(token))  # Voilà replaces this process; the token is in its environment
    return 0  # pragma: no cover
