"""Reading the docs pages as data: code blocks, the files and shell commands they show, headings,
tables and links. Plain Markdown as the pages write it (fenced code, pipe tables, ``#`` headings)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

_FENCE = re.compile(r"^```(?P<lang>[\w-]*)\s*$")
_FILE_HEADER = re.compile(r"^# (?P<path>[\w./-]+\.(?:py|toml))$")
_HEADING = re.compile(r"^(?P<marks>#{1,6}) (?P<text>.+?)\s*$")
_LINK = re.compile(r"(?<!!)\[(?P<label>[^\]]+)\]\((?P<target>[^)\s]+)\)")
_TRAILING_COMMENT = re.compile(r"\s{2,}#.*$")


def page(name: str) -> str:
    """The text of ``docs/<name>``."""
    return (DOCS / name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Block:
    lang: str
    body: str


def code_blocks(text: str) -> list[Block]:
    """Every fenced code block, in order."""
    blocks: list[Block] = []
    lang: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        match = _FENCE.match(line)
        if lang is None:
            if match:
                lang, lines = match.group("lang"), []
        elif line.strip() == "```":
            blocks.append(Block(lang, "\n".join(lines) + "\n"))
            lang = None
        else:
            lines.append(line)
    assert lang is None, "a code block is not closed"
    return blocks


def shown_files(text: str) -> dict[str, str]:
    """The files a page shows: each code block whose first line is ``# <relative path>``."""
    files: dict[str, str] = {}
    for block in code_blocks(text):
        first = block.body.split("\n", 1)[0]
        match = _FILE_HEADER.match(first)
        if match:
            files[match.group("path")] = block.body
    return files


def shell_commands(text: str) -> list[str]:
    """Every command line of the ``sh`` blocks, without trailing ``  # comments``."""
    commands: list[str] = []
    for block in code_blocks(text):
        if block.lang != "sh":
            continue
        for line in block.body.splitlines():
            line = _TRAILING_COMMENT.sub("", line).strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


@dataclass(frozen=True)
class Section:
    level: int
    title: str
    body: str


def sections(text: str) -> list[Section]:
    """The page cut at every heading (code blocks are not searched for headings)."""
    found: list[Section] = []
    level, title, lines = 0, "", []
    in_code = False
    for line in text.splitlines():
        if _FENCE.match(line) or (in_code and line.strip() == "```"):
            in_code = not in_code
        match = None if in_code else _HEADING.match(line)
        if match:
            found.append(Section(level, title, "\n".join(lines)))
            level, title, lines = len(match.group("marks")), match.group("text"), []
        else:
            lines.append(line)
    found.append(Section(level, title, "\n".join(lines)))
    return found


def table_rows(body: str) -> list[list[str]]:
    """The rows of the pipe tables in ``body`` (header and separator rows left out), cells stripped."""
    rows: list[list[str]] = []
    header_next = True
    for line in body.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            header_next = True
            continue
        cells = [cell.strip() for cell in _split_row(line)]
        if header_next:
            header_next = False  # the header row
            continue
        if all(re.fullmatch(r":?-{3,}:?", cell) for cell in cells):
            continue
        rows.append(cells)
    return rows


def _split_row(line: str) -> list[str]:
    """Cells of ``| a | b |``; a ``|`` inside backticks belongs to the cell."""
    cells, current, in_code = [], [], False
    for char in line.strip().strip("|"):
        if char == "`":
            in_code = not in_code
        if char == "|" and not in_code:
            cells.append("".join(current))
            current = []
        else:
            current.append(char)
    cells.append("".join(current))
    return cells


def first_code(cell: str) -> str | None:
    """The text of the first ``code`` span in a table cell."""
    match = re.search(r"`([^`]+)`", cell)
    return match.group(1) if match else None


def links(text: str) -> list[tuple[str, str]]:
    """``(label, target)`` of every Markdown link outside code blocks."""
    found: list[tuple[str, str]] = []
    in_code = False
    for line in text.splitlines():
        if _FENCE.match(line) or (in_code and line.strip() == "```"):
            in_code = not in_code
            continue
        if not in_code:
            found.extend((m.group("label"), m.group("target")) for m in _LINK.finditer(line))
    return found


def anchor(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    slug = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return slug.replace(" ", "-")
