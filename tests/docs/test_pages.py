"""The docs pages as a whole: linked from the README, links that lead somewhere, code that parses."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from tests.docs.markdown import DOCS, ROOT, anchor, code_blocks, links, sections

PAGES = sorted(path.name for path in DOCS.glob("*.md"))
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_links_every_page_and_points_nowhere_outside_the_repository() -> None:
    targets = {target.split("#")[0] for _, target in links(README)}
    for name in PAGES:
        assert f"docs/{name}" in targets, f"README.md does not link docs/{name}"
    assert "../shared" not in README
    assert "../" not in "".join(targets)


def resolve(source: Path, target: str) -> tuple[Path, str]:
    path, _, fragment = target.partition("#")
    return (source.parent / path).resolve() if path else source, fragment


@pytest.mark.parametrize("source", [ROOT / "README.md", *(DOCS / name for name in PAGES)], ids=lambda p: p.name)
def test_every_relative_link_leads_to_a_file_and_heading_in_the_repository(source: Path) -> None:
    for label, target in links(source.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, fragment = resolve(source, target)
        assert path.exists(), f"{source.name}: [{label}]({target}) leads nowhere"
        assert ROOT in path.parents or path == ROOT, f"{source.name}: [{label}]({target}) leaves the repository"
        if fragment:
            titles = {anchor(s.title) for s in sections(path.read_text(encoding="utf-8"))}
            assert fragment in titles, f"{source.name}: [{label}]({target}): no such heading in {path.name}"


@pytest.mark.parametrize("name", PAGES)
def test_code_blocks_parse(name: str) -> None:
    for block in code_blocks((DOCS / name).read_text(encoding="utf-8")):
        if block.lang == "python":
            ast.parse(block.body)
        elif block.lang == "toml":
            for alternative in alternatives(block.body):
                tomllib.loads(alternative)


def alternatives(body: str) -> list[str]:
    """A TOML block that offers alternatives (a paragraph starting ``# or ...``), one at a time."""
    if not re.search(r"^# or ", body, flags=re.M):
        return [body]
    return [part for part in re.split(r"\n\s*\n", body) if part.strip()]


@pytest.mark.parametrize("name", PAGES)
def test_pages_are_markdown_without_html(name: str) -> None:
    text = (DOCS / name).read_text(encoding="utf-8")
    outside_code = re.sub(r"```.*?```", "", text, flags=re.S)
    outside_code = re.sub(r"`[^`]*`", "", outside_code)
    assert not re.search(r"</?[a-zA-Z][^>]*>", outside_code), f"{name} holds HTML"
