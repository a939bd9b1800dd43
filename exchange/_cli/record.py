"""``exchange record RUN``: the batch record of a run, for QA (``Runtime.record``): as JSON, as one
self-contained printable HTML file, or as a short summary with its exceptions on the terminal."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import click

from exchange._cli.common import Context, print_json
from exchange._cli.render import printable


def write_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: a reader never finds half a record."""
    folder = path.parent if str(path.parent) else Path(".")
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def summary(record: dict[str, Any]) -> list[str]:
    """The terminal's lines: the run, what the record holds, then each exception."""
    run = record["run"]
    lines = [f"{run['id']}  {run['workflow']}  {run['status']}  created by {run['created_by']}",
             " · ".join(f"{len(record[key])} {label}" for key, label in (
                 ("steps", "step(s)"), ("commands", "command(s)"), ("prompts", "prompt(s)"),
                 ("tag_writes", "tag write(s)"), ("phases", "phase(s)"), ("units", "unit grant(s)"),
                 ("signatures", "signature(s)"))),
             f"{len(record['exceptions'])} exception(s)"]
    for item in record["exceptions"]:
        who = f" by {item['actor']}" if item["actor"] else ""
        why = f" ({item['reason']})" if item["reason"] else ""
        lines.append(f"  {item['at'] or '-'}  {item['kind']:<16} {item['detail']}{who}{why}")
    return [printable(line) for line in lines]


@click.command("record")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON (fields: docs/batch-record.md).")
@click.option("--html", "html_file", default=None, metavar="FILE",
              type=click.Path(dir_okay=False, writable=True, allow_dash=True, path_type=Path),
              help="Write the record as one self-contained, printable HTML file ('-': print it).")
@click.pass_obj
def record(obj: Context, run_id: str, as_json: bool, html_file: Path | None) -> None:
    """The batch record of a run for review and release: steps, commands, prompts, tag writes, exceptions.

    RUN_ID: the id or a unique prefix. Without --json or --html, a summary with the exceptions to
    review. Reads only."""
    if as_json and html_file is not None:
        raise click.UsageError("--json and --html are one or the other")
    runtime = obj.runtime(load_apps=False)
    found = runtime.record(run_id)
    if as_json:
        print_json(found)
        return
    if html_file is not None:
        from exchange._record import render_document

        page = render_document(found)
        if str(html_file) == "-":
            click.echo(page, nl=False)
        else:
            write_file(html_file, page)
            click.echo(f"record of run {found['run']['id']} written to {html_file}", err=True)
        return
    for line in summary(found):
        click.echo(line)


COMMANDS = [record]

__all__ = ["COMMANDS"]
