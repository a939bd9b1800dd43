"""The gateway's code path has no POSIX-only call outside a platform branch, so `exchange gateway`
can start on Windows (where many Ignition sites run): a lint over the package's source.

What it catches: a module-level ``import fcntl`` (the node lock had one, which made every
``exchange gateway`` and ``exchange run`` fail to start on Windows), ``os.uname()`` (the default
actor had one), signals Windows does not define. What is allowed: such a name inside an
``if sys.platform ...`` / ``if os.name ...`` branch, and the modules listed in ``ALLOWED`` with why.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "exchange"

POSIX_MODULES = {"fcntl", "pwd", "grp", "termios", "tty", "pty", "resource", "posix", "syslog"}
POSIX_OS_FUNCTIONS = {
    "uname", "fork", "forkpty", "getuid", "geteuid", "getgid", "getegid", "setsid", "killpg", "getpgid",
    "sysconf", "statvfs", "getloadavg", "mkfifo", "chown", "lchown", "nice", "wait3", "wait4",
}
POSIX_SIGNALS = {"SIGKILL", "SIGSTOP", "SIGCONT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGCHLD", "SIGQUIT"}

# module (relative to the package) -> why it may use POSIX-only names
ALLOWED = {
    "_store/sql/faults.py": "fault injection for the crash tests; only active when a test arms it",
}


def _platform_test(test: ast.expr) -> bool:
    text = ast.unparse(test)
    return "sys.platform" in text or "os.name" in text or "platform.system" in text


def _violations(tree: ast.Module) -> list[str]:
    found: list[str] = []

    def visit(node: ast.AST, guarded: bool) -> None:
        if isinstance(node, ast.If) and _platform_test(node.test):
            for child in [*node.body, *node.orelse]:
                visit(child, True)
            return
        if not guarded:
            if isinstance(node, ast.Import):
                found.extend(f"line {node.lineno}: import {a.name}" for a in node.names
                             if a.name.split(".")[0] in POSIX_MODULES)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in POSIX_MODULES:
                found.append(f"line {node.lineno}: from {node.module} import ...")
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.value.id == "os" and node.attr in POSIX_OS_FUNCTIONS:
                    found.append(f"line {node.lineno}: os.{node.attr}")
                if node.value.id == "signal" and node.attr in POSIX_SIGNALS:
                    found.append(f"line {node.lineno}: signal.{node.attr}")
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    visit(tree, False)
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(PACKAGE)) for p in MODULES])
def test_no_posix_only_call_outside_a_platform_branch(path: Path) -> None:
    relative = str(path.relative_to(PACKAGE))
    found = _violations(ast.parse(path.read_text(encoding="utf-8")))
    if relative in ALLOWED:
        return
    assert not found, f"exchange/{relative} uses POSIX-only names outside a platform branch: {found}"


def test_the_lint_finds_what_broke_windows_before() -> None:
    """The two calls that made the gateway fail on Windows are caught, and a platform branch is not."""
    broken = ast.parse("import fcntl\nimport os\nuser = os.uname().nodename\n")
    assert _violations(broken) == ["line 1: import fcntl", "line 3: os.uname"]
    branched = ast.parse("import sys\nif sys.platform == 'win32':\n    import msvcrt\nelse:\n    import fcntl\n")
    assert _violations(branched) == []


def test_the_allowed_modules_still_need_their_exception() -> None:
    """An entry in ALLOWED that no longer uses POSIX-only names is removed, not kept for ever."""
    for relative in ALLOWED:
        path = PACKAGE / relative
        assert _violations(ast.parse(path.read_text(encoding="utf-8"))), f"{relative} no longer needs ALLOWED"
