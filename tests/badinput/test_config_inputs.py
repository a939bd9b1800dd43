"""Bad configuration and bad store targets: each is refused with an error that names the file, the
table and the key (or the store), and nothing is created or changed.

Real parts only: config files on disk, real SQLite files, the session's embedded PostgreSQL, and the
``exchange`` command in a process of its own: the installed console script in a subprocess, or (tests
that take ``exchange_zygote``) a process forked from the session's zygote, which imported what every
``exchange`` process imports before ``main()`` (see ``tests/forkserver.py``).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from exchange._config import load_config
from exchange._store.store import Store
from exchange.errors import ConfigError, StoreError
from tests.conftest import PostgresServer
from tests.forkserver import ForkServer

# ----- config files --------------------------------------------------------------------------------

TAG = '[devices.plc]\ndriver = "modbus"\nhost = "127.0.0.1"\n[tags."[p]Tank/Level"]\ndevice = "plc"\n'

# (id, the config file's bytes, fragments its error must hold besides the file's name)
CONFIG_CASES: list[tuple[str, bytes, tuple[str, ...]]] = [
    ("store-key-typo", b'[store]\nulr = "sqlite:///data/plant.db"\n',
     ("store: unknown key 'ulr' (did you mean 'url'?)",)),
    ("store-shared-typo", b'[store]\nurl = "sqlite:///x.db"\nshare = true\n',
     ("store: unknown key 'share' (did you mean 'shared'?)",)),
    ("store-unknown-key-no-match", b'[store]\nbackend = "sqlite"\n',
     ("store: unknown key 'backend'", "known keys: shared, url")),
    ("store-shared-not-bool", b'[store]\nshared = "yes"\n',
     ("store.shared must be true or false, got a string 'yes'",)),
    ("store-url-empty", b'[store]\nurl = ""\n', ("store.url must be a non-empty string",)),
    ("store-url-integer", b"[store]\nurl = 5\n", ("store.url must be a non-empty string, got an integer 5",)),
    ("store-not-a-table", b'store = "sqlite:///x.db"\n', ("[store] must be a table, got a string",)),
    ("key-before-header", b'url = "sqlite:///x.db"\n[store]\n',
     ("'url' is outside any table (did you mean to put it under [store]?",)),
    ("section-typo", b'[storage]\nurl = "sqlite:///x.db"\n', ("unknown section 'storage' (did you mean 'store'?)",)),
    ("section-case", b'[Store]\nurl = "sqlite:///x.db"\n', ("unknown section 'Store' (did you mean 'store'?)",)),
    ("apps-key-typo", b'[apps]\npath = ["apps"]\n', ("apps: unknown key 'path' (did you mean 'paths'?)",)),
    ("apps-paths-string", b'[apps]\npaths = "apps"\n', ("apps.paths must be a list of non-empty strings",)),
    ("apps-paths-empty-string", b'[apps]\npaths = [""]\n', ("apps.paths must be a list of non-empty strings",)),
    ("http-key-typo", b"[http]\nverify_tsl = false\n",
     ("http: unknown key 'verify_tsl' (did you mean 'verify_tls'?)",)),
    ("http-verify-string", b'[http]\nverify_tls = "no"\n',
     ("http.verify_tls must be true or false, got a string 'no'",)),
    ("http-timeout-zero", b"[http]\ndefault_timeout_ms = 0\n",
     ("http.default_timeout_ms must be an integer from 1 to 86400000, got an integer 0",)),
    ("http-pool-float", b"[http]\npool_connections = 1e3\n",
     ("http.pool_connections must be an integer from 1 to 10000, got a float 1000.0",)),
    ("api-listen-no-port", b'[api]\nlisten = "127.0.0.1"\n',
     ('api.listen must be "HOST:PORT" with a port from 0 to 65535, got \'127.0.0.1\'',)),
    ("api-listen-port-range", b'[api]\nlisten = "0.0.0.0:70000"\n', ("api.listen must be", "70000")),
    ("api-listen-number", b"[api]\nlisten = 8088\n", ('api.listen must be a string "HOST:PORT", got an integer 8088',)),
    ("api-cert-alone", b'[api]\nlisten = "127.0.0.1:8088"\ncert = "gw.pem"\n',
     ("api: cert and key go together (TLS needs both), got only cert",)),
    ("api-key-typo", b'[api]\nlisen = "127.0.0.1:8088"\n', ("api: unknown key 'lisen' (did you mean 'listen'?)",)),
    ("api-session-zero", b"[api]\nsession_hours = 0\n", ("api.session_hours must be a number above 0",)),
    ("api-proxies-string", b'[api]\ntrusted_proxies = "10.0.0.5"\n',
     ("api.trusted_proxies must be a list of addresses or networks", "got a string '10.0.0.5'")),
    ("api-proxies-host-name", b'[api]\ntrusted_proxies = ["10.0.0.5", "proxy.plant"]\n',
     ("api.trusted_proxies: a string 'proxy.plant' is not an IP address or network",)),
    ("api-password-min-low", b"[api]\npassword_min_chars = 4\n",
     ("api.password_min_chars must be an integer from 8 to 128, got an integer 4",)),
    ("opcua-listen-http", b'[opcua_server]\nlisten = "http://127.0.0.1:4841/"\n',
     ("opcua_server.listen must be an opc.tcp://HOST:PORT/PATH address",)),
    ("opcua-listen-no-port", b'[opcua_server]\nlisten = "opc.tcp://127.0.0.1/x"\n',
     ("opcua_server.listen must be an opc.tcp://HOST:PORT/PATH address", "a host and a port")),
    ("opcua-key-alone", b'[opcua_server]\nkey = "gw.pem"\n', ("opcua_server: cert and key go together",)),
    ("opcua-refresh-tiny", b"[opcua_server]\nrefresh_ms = 1\n",
     ("opcua_server.refresh_ms must be an integer from 50 to 60000, got an integer 1",)),
    ("attention-webhook-ftp", b"[attention]\nwebhook_url = \"ftp://mes/hook\"\n",
     ("attention.webhook_url must be an http:// or https:// URL, got a string 'ftp://mes/hook'",)),
    ("attention-hours-zero", b"[attention]\nrecent_hours = 0\n",
     ("attention.recent_hours must be a number above 0",)),
    ("attention-unknown-key", b"[attention]\nwebhook = \"http://mes/hook\"\n",
     ("attention", "webhook")),
    ("retention-days-negative", b"[retention]\nfinished_runs_days = -1\n",
     ("retention.finished_runs_days must be a number above 0",)),
    ("retention-days-a-blink", b"[retention]\nfinished_runs_days = 1e-9\n",
     ("retention.finished_runs_days must be at least one hour (1/24 = 0.0417 days), got a float 1e-09",)),
    ("retention-days-under-an-hour", b"[retention]\nfinished_runs_days = 0.04\n",
     ("retention.finished_runs_days must be at least one hour", "got a float 0.04 (3.46e+03 s)")),
    ("retention-max-zero", b"[retention]\nmax_finished_runs = 0\n",
     ("retention.max_finished_runs must be an integer from 1 to 2147483647, got an integer 0",)),
    ("schedule-bad-cron", b'[schedules.cip]\nworkflow = "plant.cip"\ncron = "61 * * * *"\n',
     ("schedules.cip.cron '61 * * * *' is not a cron expression of 5 fields",)),
    ("schedule-seven-fields", b'[schedules.cip]\nworkflow = "plant.cip"\ncron = "0 0 0 * * * *"\n',
     ("schedules.cip.cron", "or 6 with seconds first")),
    ("schedule-never-fires", b'[schedules.cip]\nworkflow = "plant.cip"\ncron = "0 6 31 2 *"\n',
     ("schedules.cip.cron '0 6 31 2 *' never fires: no date matches its day, month and weekday fields",)),
    ("schedule-never-fires-seconds", b'[schedules.cip]\nworkflow = "plant.cip"\ncron = "* * * 31 4,6,9,11 *"\n',
     ("schedules.cip.cron '* * * 31 4,6,9,11 *' never fires",)),
    ("schedule-never-fires-nth-weekday", b'[schedules.cip]\nworkflow = "plant.cip"\ncron = "0 0 30 2 1#5"\n',
     ("schedules.cip.cron '0 0 30 2 1#5' never fires",)),
    ("schedule-bad-zone", b'[schedules.cip]\nworkflow = "plant.cip"\ncron = "0 6 * * *"\ntimezone = "Mars/Olympus"\n',
     ("schedules.cip.timezone 'Mars/Olympus' is not a known time zone",)),
    ("schedule-catch-up", b'[schedules.cip]\nworkflow = "plant.cip"\ncron = "0 6 * * *"\ncatch_up = "all"\n',
     ("schedules.cip.catch_up must be one of latest, none, got 'all'",)),
    ("schedule-no-workflow", b'[schedules.cip]\ncron = "0 6 * * *"\n',
     ("schedules.cip.workflow must be a non-empty string (missing)",)),
    ("schedule-key-typo", b'[schedules.cip]\nworkflow = "w"\ncron = "0 6 * * *"\ncorn = 1\n',
     ("schedules.cip: unknown key 'corn' (did you mean 'cron'?)",)),
    ("trigger-unknown-tag", b'[triggers.start]\ntag = "[p]Nope"\nworkflow = "w"\n',
     ("triggers.start: tag '[p]Nope' is not configured",)),
    ("command-tag-bad-cmd", b'[command_tags.hold]\ntag = "[p]Nope"\ncmd = "PAUSE"\npartition_key = "l1"\n',
     ("command_tags.hold.cmd must be one of HOLD, RESUME, STOP, ABORT, RESET, got 'PAUSE'",)),
    ("command-tag-no-target", b'[command_tags.hold]\ntag = "[p]Nope"\ncmd = "HOLD"\n',
     ("command_tags.hold: give partition_key or workflow",)),
    ("retention-typo", b"[retention]\nfinished_run_days = 3\n",
     ("retention: unknown key 'finished_run_days' (did you mean 'finished_runs_days'?)",)),
    ("engine-key-typo", b"[engine]\nwrokers = 8\n", ("engine: unknown key 'wrokers' (did you mean 'workers'?)",)),
    ("engine-workers-huge", b"[engine]\nworkers = 99999999999999999999\n",
     ("engine.workers must be an integer from 1 to 100000, got an integer 99999999999999999999",)),
    ("engine-workers-huge-hex", b"[engine]\nworkers = 0x" + b"f" * 64 + b"\n",
     ("engine.workers must be an integer from 1 to 100000, got an integer of about 77 digits",)),
    ("engine-workers-string", b'[engine]\nworkers = "8"\n', ("engine.workers must be an integer", "got a string '8'")),
    ("engine-workers-bool", b"[engine]\nworkers = true\n", ("engine.workers must be an integer", "got a boolean true")),
    ("engine-params-zero", b"[engine]\nparams_max_bytes = 0\n",
     ("engine.params_max_bytes must be an integer from 1 to 2147483647, got an integer 0",)),
    ("engine-result-negative", b"[engine]\nresult_max_bytes = -5\n", ("engine.result_max_bytes must be an integer",)),
    ("engine-message-float", b"[engine]\nmessage_max_bytes = 3.5\n",
     ("engine.message_max_bytes must be an integer", "got a float 3.5")),
    ("engine-reason-too-large", b"[engine]\nreason_max_chars = 4294967296\n",
     ("engine.reason_max_chars must be an integer from 1 to 2147483647, got an integer 4294967296",)),
    ("engine-lease-nan", b"[engine]\nlease_seconds = nan\n",
     ("engine.lease_seconds must be a number above 0 and at most 86400, got a float nan",)),
    ("engine-stop-inf", b"[engine]\nstop_timeout_seconds = inf\n", ("engine.stop_timeout_seconds must be a number",)),
    ("engine-lease-zero", b"[engine]\nlease_seconds = 0\n", ("engine.lease_seconds must be a number above 0",)),
    ("engine-poll-too-large", b"[engine]\nmailbox_poll_ms = 100000000000\n",
     ("engine.mailbox_poll_ms must be an integer from 0 to 86400000",)),
    ("engine-progress-negative", b"[engine]\nprogress_interval_ms = -1\n", ("engine.progress_interval_ms",)),
    ("engine-node-id-integer", b"[engine]\nnode_id = 7\n", ("engine.node_id must be a string, got an integer 7",)),
    ("engine-node-id-long", b'[engine]\nnode_id = "' + b"n" * 300 + b'"\n',
     ("engine.node_id must be at most 100 printable characters",)),
    ("engine-node-id-nul", b'[engine]\nnode_id = "gw\\u0000"\n',
     ("engine.node_id must be at most 100 printable characters",)),
    ("engine-not-a-table", b"engine = 3\n", ("[engine] must be a table, got an integer 3",)),
    ("tag-key-typo", TAG.encode() + b'adress = "HR1"\n',
     ('tags."[p]Tank/Level": unknown key \'adress\' (did you mean \'address\'?)',)),
    ("tag-device-typo", TAG.replace('device = "plc"', 'device = "plx"').encode() + b'address = "HR1"\n',
     ("device 'plx' is not a configured device (did you mean 'plc'?)",)),
    ("tag-min-nan", TAG.encode() + b'address = "HR1"\nmin = nan\n',
     ('tags."[p]Tank/Level".min must be a number, got a float nan',)),
    ("tag-min-above-max", TAG.encode() + b'address = "HR1"\nmin = 10\nmax = 1\n',
     ('tags."[p]Tank/Level": min 10 is above max 1',)),
    ("tag-bool-numbers-string", TAG.encode() + b'address = "HR1"\nbool_numbers = "yes"\n',
     ('tags."[p]Tank/Level".bool_numbers must be true or false',)),
    ("tag-on-doubt-integer", TAG.encode() + b'address = "HR1"\non_doubt = 1\n',
     ('tags."[p]Tank/Level".on_doubt must be "readback" or "fail", got an integer 1',)),
    ("tag-on-doubt-typo", TAG.encode() + b'address = "HR1"\non_doubt = "readbak"\n',
     ('tags."[p]Tank/Level".on_doubt must be "readback" or "fail", got a string \'readbak\' '
      "(did you mean 'readback'?)",)),
    ("database-url-typo", b'[databases.mes]\nulr = "sqlite:///mes.db"\n',
     ("databases.mes: unknown key 'ulr' (did you mean 'url'?)",)),
    ("database-url-missing", b"[databases.mes]\npool_size = 3\n", ("databases.mes: url is missing",)),
    ("database-url-empty", b'[databases.mes]\nurl = ""\n', ("databases.mes.url must be a non-empty string",)),
    ("env-variable-unset", b'[store]\nurl = "${EXCHANGE_BADINPUT_UNSET}"\n',
     ("store.url: environment variable ${EXCHANGE_BADINPUT_UNSET} is not set",)),
    ("typo-wins-over-unset-variable", b'[store]\nulr = "${EXCHANGE_BADINPUT_UNSET}"\n',
     ("store: unknown key 'ulr' (did you mean 'url'?)",)),
    ("duplicate-key", b'[store]\nurl = "sqlite:///a.db"\nurl = "sqlite:///b.db"\n', ("is not valid TOML",)),
    ("latin-1", b'[store]\nurl = "sqlite:///Stra\xdfe.db"\n',
     ("is not UTF-8 text: byte 0xdf at offset 29 (line 2)",)),
    ("latin-1-after-bom", b'\xef\xbb\xbf# K\xfchlung\n[store]\n',
     ("is not UTF-8 text: byte 0xfc at offset 6 (line 1)",)),
    ("integer-5000-digits", b"[engine]\nworkers = " + b"9" * 5000 + b"\n",
     ("is not usable TOML: Exceeds the limit (4300 digits)",)),
    ("nested-too-deeply", b"[store]\nx = " + b"[" * 5000 + b"]" * 5000 + b"\n", ("values nested too deeply",)),
    ("nul-byte", b'[store]\nurl = "sqlite:///x.db"\x00\n', ("is not valid TOML",)),
]


# three Modbus tags, for [simulation] cases
SIM_TAGS = (b'[devices.plc]\ndriver = "modbus"\nhost = "127.0.0.1"\n'
            + b"".join(b'[tags."[p]%s"]\ndevice = "plc"\naddress = "C%d"\n' % (name, n)
                       for n, name in enumerate((b"A", b"B", b"C"), start=1)))
CRON = b'[schedules.cip]\nworkflow = "plant.cip"\ncron = "0 6 * * *"\n'

CONFIG_CASES += [
    ("simulation-follows-self", SIM_TAGS + b'[simulation.tags."[p]A"]\nfollows = "[p]A"\n',
     ('simulation.tags."[p]A".follows names the tag itself',)),
    ("simulation-follows-loop-of-two",
     SIM_TAGS + b'[simulation.tags."[p]A"]\nfollows = "[p]B"\n[simulation.tags."[p]B"]\nfollows = "[p]A"\n',
     ("simulation.tags.\"[p]A\".follows: a loop, '[p]A' follows '[p]B' follows '[p]A'",
      "never takes a value from outside it")),
    ("simulation-follows-loop-of-three",
     SIM_TAGS + b'[simulation.tags."[p]A"]\nfollows = "[p]B"\n[simulation.tags."[p]B"]\nfollows = "[p]C"\n'
     b'[simulation.tags."[p]C"]\nfollows = "[p]B"\ndelay_ms = 100\n',
     ("simulation.tags.\"[p]B\".follows: a loop, '[p]B' follows '[p]C' follows '[p]B'",)),
    ("attention-webhook-crlf", b'[attention]\nwebhook_url = "http://mes/hook\\r\\nX-Injected: 1"\n',
     ("attention.webhook_url must be a URL without blanks or control characters", "'\\r'")),
    ("attention-webhook-space", b'[attention]\nwebhook_url = "http://mes/my hook"\n',
     ("attention.webhook_url must be a URL without blanks or control characters", "' ' is character 14")),
    ("attention-webhook-leading-space", b'[attention]\nwebhook_url = " http://mes/hook"\n',
     ("attention.webhook_url must be an http:// or https:// URL",)),
    ("attention-webhook-no-host", b'[attention]\nwebhook_url = "http:///hook"\n',
     ("attention.webhook_url has no host: 'http:///hook'",)),
    ("attention-webhook-only-port", b'[attention]\nwebhook_url = "https://:8443/hook"\n',
     ("attention.webhook_url has no host",)),
    ("attention-webhook-bad-port", b'[attention]\nwebhook_url = "http://mes:99999/hook"\n',
     ("attention.webhook_url has a port that is not a number from 0 to 65535",)),
    ("attention-webhook-link-local", b'[attention]\nwebhook_url = "http://169.254.169.254/latest"\n',
     ("attention.webhook_url: 169.254.169.254 is a link-local address",)),
    ("attention-webhook-link-local-v6", b'[attention]\nwebhook_url = "http://[fe80::1]:8080/hook"\n',
     ("attention.webhook_url: fe80::1 is a link-local address",)),
    ("attention-webhook-unspecified", b'[attention]\nwebhook_url = "http://0.0.0.0:8080/hook"\n',
     ("attention.webhook_url: 0.0.0.0 is not an address a POST can reach",)),
    ("schedule-zone-trailing-blank", CRON + b'timezone = "Europe/Berlin "\n',
     ("schedules.cip.timezone 'Europe/Berlin ' has blanks around it: write 'Europe/Berlin'",)),
    ("schedule-zone-leading-blank", CRON + b'timezone = " UTC"\n',
     ("schedules.cip.timezone ' UTC' has blanks around it: write 'UTC'",)),
]


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its content (folders as empty entries): what a test may not change."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"") for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize(("raw", "fragments"), [case[1:] for case in CONFIG_CASES],
                         ids=[case[0] for case in CONFIG_CASES])
def test_a_bad_config_file_names_the_file_and_the_key_and_creates_nothing(
    tmp_path: Path, raw: bytes, fragments: tuple[str, ...]
) -> None:
    path = tmp_path / "exchange.toml"
    path.write_bytes(raw)
    before = _tree(tmp_path)
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    message = str(caught.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message
    assert "\n" not in message
    assert _tree(tmp_path) == before


def test_every_config_case_is_a_distinct_input() -> None:
    assert len({raw for _, raw, _ in CONFIG_CASES}) == len(CONFIG_CASES) >= 30


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda p: p / "missing.toml", "missing.toml does not exist"),
        (lambda p: p, "cannot be read"),  # a folder
    ],
    ids=["missing-file", "a-folder"],
)
def test_a_config_path_that_is_no_file_is_named(tmp_path: Path, make: Callable[[Path], Path], fragment: str) -> None:
    path = make(tmp_path)
    with pytest.raises(ConfigError, match=fragment) as caught:
        load_config(path, env={})
    assert str(path) in str(caught.value)
    assert list(tmp_path.iterdir()) == []


# ----- the store: missing files, foreign tables ----------------------------------------------------


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _foreign_sqlite(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE recipes (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("CREATE TABLE lots (id INTEGER PRIMARY KEY)")
        conn.execute("CREATE VIEW recipe_names AS SELECT name FROM recipes")
        conn.execute("INSERT INTO recipes (name) VALUES ('bread')")
    conn.close()
    return path


def _store_with_a_run(url: str, *, shared: bool = False) -> str:
    from exchange._store.runs.runs import NewRun

    store = Store(url, shared=shared)
    try:
        run_id, _ = store.create_run(NewRun(workflow="demo.small", params_json="{}", code_version="v1",
                                            created_by="test"))
    finally:
        store.close()
    return run_id


def _run_ids(url: str) -> list[str]:
    store = Store(url, create=False, shared=True)
    try:
        return [run.id for run in store.runs.list(limit=100)]
    finally:
        store.close()


def test_a_missing_sqlite_store_is_refused_by_a_read_and_nothing_is_created(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "folder" / "exchange.db"
    with pytest.raises(StoreError) as caught:
        Store(f"sqlite:///{path}", create=False)
    assert f"store file {path} does not exist" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_sqlite_file_in_an_existing_folder_is_not_created(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        Store(f"sqlite:///{tmp_path / 'exchange.db'}", create=False)
    assert list(tmp_path.iterdir()) == []


def test_a_folder_in_place_of_the_store_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "exchange.db").mkdir()
    with pytest.raises(StoreError, match=r"exchange\.db is a folder, not a store file"):
        Store(f"sqlite:///{tmp_path / 'exchange.db'}", create=False)


def test_an_empty_sqlite_database_is_not_made_a_store_by_a_read(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()  # a file with no tables
    with pytest.raises(StoreError, match="holds no Exchange store; nothing was created"):
        Store(f"sqlite:///{path}", create=False)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)
    conn.close()


def test_an_existing_sqlite_store_opens_for_a_read(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'var' / 'exchange.db'}"
    run_id = _store_with_a_run(url)
    store = Store(url, create=False)
    try:
        assert [run.id for run in store.runs.list(limit=10)] == [run_id]
    finally:
        store.close()


def test_a_sqlite_file_of_another_application_is_refused_unchanged(tmp_path: Path) -> None:
    path = _foreign_sqlite(tmp_path / "recipes.db")
    digest = _sha(path)
    for create in (True, False):
        with pytest.raises(ConfigError) as caught:
            Store(f"sqlite:///{path}", create=create)
        message = str(caught.value)
        assert f"store sqlite:///{path} holds tables that are not Exchange's (lots, recipe_names, recipes)" in message
        assert "[store] shared = true" in message
    assert _sha(path) == digest  # not even switched to WAL mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recipes.db"]


def test_a_sqlite_store_that_another_application_added_tables_to_is_refused_and_keeps_its_runs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "exchange.db"
    url = f"sqlite:///{path}"
    run_id = _store_with_a_run(url)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE scratch (x)")
    conn.close()
    with pytest.raises(ConfigError, match=r"holds tables that are not Exchange's \(scratch\)"):
        Store(url)
    assert _run_ids(url) == [run_id]


def test_a_shared_sqlite_database_keeps_both(tmp_path: Path) -> None:
    path = _foreign_sqlite(tmp_path / "plant.db")
    url = f"sqlite:///{path}"
    run_id = _store_with_a_run(url, shared=True)
    assert _run_ids(url) == [run_id]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT name FROM recipes").fetchall() == [("bread",)]
    conn.close()


def test_more_than_five_foreign_tables_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    with sqlite3.connect(path) as conn:
        for i in range(8):
            conn.execute(f"CREATE TABLE t{i} (x)")
    conn.close()
    with pytest.raises(ConfigError, match=r"\(t0, t1, t2, t3, t4 and 3 more\)"):
        Store(f"sqlite:///{path}")


@pytest.fixture
def pg_database(postgres: PostgresServer) -> Iterator[tuple[str, str]]:
    """A fresh PostgreSQL database: (its name, a store URL for it carrying a password to hide)."""
    name = postgres.create_database("badinput")
    url = f"postgresql+psycopg://postgres:s3cret-pw@/{name}?host={postgres.socket_dir}"
    yield name, url


def _pg_exec(url: str, *statements: str) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        engine.dispose()


def _pg_tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            inspector = inspect(conn)
            return {f"{schema}.{name}" for schema in inspector.get_schema_names() if schema != "information_schema"
                    for name in inspector.get_table_names(schema=schema)}
    finally:
        engine.dispose()


def test_a_postgresql_database_of_another_application_is_refused_and_left_alone(
    pg_database: tuple[str, str],
) -> None:
    _, url = pg_database
    _pg_exec(url, "CREATE TABLE lots (id SERIAL PRIMARY KEY, code TEXT)", "INSERT INTO lots (code) VALUES ('L-1')")
    for create in (True, False):
        with pytest.raises(ConfigError) as caught:
            Store(url, create=create)
        message = str(caught.value)
        assert "holds tables that are not Exchange's (lots)" in message
        assert "postgres:***@" in message and "s3cret-pw" not in message
    assert _pg_tables(url) == {"public.lots"}


def test_a_postgresql_table_in_another_schema_counts(pg_database: tuple[str, str]) -> None:
    _, url = pg_database
    _pg_exec(url, "CREATE SCHEMA mes", "CREATE TABLE mes.orders (id INTEGER)")
    with pytest.raises(ConfigError, match=r"not Exchange's \(mes\.orders\)"):
        Store(url)
    assert _pg_tables(url) == {"mes.orders"}


def test_a_postgresql_store_with_a_foreign_table_added_keeps_its_runs(pg_database: tuple[str, str]) -> None:
    _, url = pg_database
    run_id = _store_with_a_run(url)
    _pg_exec(url, "CREATE VIEW run_report AS SELECT id FROM exchange_runs")
    with pytest.raises(ConfigError, match=r"not Exchange's \(run_report\)"):
        Store(url)
    assert _run_ids(url) == [run_id]


def test_a_shared_postgresql_database_keeps_both(pg_database: tuple[str, str]) -> None:
    _, url = pg_database
    _pg_exec(url, "CREATE TABLE lots (id INTEGER)")
    run_id = _store_with_a_run(url, shared=True)
    assert _run_ids(url) == [run_id]
    assert "public.lots" in _pg_tables(url) and "public.exchange_runs" in _pg_tables(url)


def test_an_empty_postgresql_database_is_not_made_a_store_by_a_read(pg_database: tuple[str, str]) -> None:
    _, url = pg_database
    with pytest.raises(StoreError, match="holds no Exchange store; nothing was created"):
        Store(url, create=False)
    assert _pg_tables(url) == set()
    _store_with_a_run(url)  # a command that runs workflows creates it
    assert "public.exchange_schema" in _pg_tables(url)


# ----- through the installed ``exchange`` command ---------------------------------------------------

APP = '''
from exchange.workflows.bootstrap import workflow

@workflow(name="bad.noop")
def noop():
    return 1
'''


def exchange(
    cwd: Path, *args: str, env: dict[str, str] | None = None, zygote: ForkServer | None = None
) -> subprocess.CompletedProcess[str]:
    """The ``exchange`` console script of this environment, as an operator runs it (forked from
    ``zygote`` if given)."""
    script = Path(sys.executable).with_name("exchange")
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "exchange._cli.main"]
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    full_env.update(env or {})
    if zygote is not None:
        script_dir = script.parent if script.is_file() else None
        return zygote.run(args, cwd=cwd, env=full_env, timeout=60, script_dir=script_dir)
    return subprocess.run([*command, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=60)


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "bad_app.py").write_text(APP)
    return tmp_path


@pytest.mark.parametrize("command", [("runs",), ("gateway",), ("start", "bad.noop")])
def test_cli_a_store_key_typo_is_refused_before_any_store_is_opened(
    project: Path, command: tuple[str, ...], exchange_zygote: ForkServer
) -> None:
    url = f"sqlite:///{project / 'data' / 'plant.db'}"
    run_id = _store_with_a_run(url)
    (project / "exchange.toml").write_text(f'[store]\nulr = "{url}"\n')
    before = _tree(project)
    line = one_line_error(exchange(project, *command, zygote=exchange_zygote))
    assert "exchange.toml: store: unknown key 'ulr' (did you mean 'url'?)" in line
    assert _tree(project) == before  # no default store under var/
    assert _run_ids(url) == [run_id]


def test_cli_a_latin_1_config_names_the_file_and_the_byte(project: Path, exchange_zygote: ForkServer) -> None:
    (project / "exchange.toml").write_bytes(b'# R\xfchrwerk Linie 1\n[store]\nurl = "sqlite:///var/x.db"\n')
    line = one_line_error(exchange(project, "runs", zygote=exchange_zygote))
    assert "exchange.toml is not UTF-8 text: byte 0xfc at offset 3 (line 1)" in line
    assert sorted(p.name for p in project.iterdir()) == ["apps", "exchange.toml"]


def test_cli_an_apps_key_typo_is_refused(project: Path, exchange_zygote: ForkServer) -> None:
    (project / "exchange.toml").write_text('[apps]\npath = ["apps"]\n')
    line = one_line_error(exchange(project, "workflows", zygote=exchange_zygote))
    assert "apps: unknown key 'path' (did you mean 'paths'?)" in line


def test_cli_an_http_key_typo_is_refused(project: Path, exchange_zygote: ForkServer) -> None:
    (project / "exchange.toml").write_text("[http]\nverify_tsl = false\n")
    line = one_line_error(exchange(project, "runs", zygote=exchange_zygote))
    assert "http: unknown key 'verify_tsl' (did you mean 'verify_tls'?)" in line


def test_cli_a_huge_integer_is_refused(project: Path, exchange_zygote: ForkServer) -> None:
    (project / "exchange.toml").write_text("[engine]\nworkers = 100000000000000000000\n")
    line = one_line_error(exchange(project, "gateway", zygote=exchange_zygote))
    assert "engine.workers must be an integer from 1 to 100000" in line


@pytest.mark.parametrize("command", [("runs",), ("show", "0000"), ("send", "0000", "HOLD"), ("cancel", "0000")])
def test_cli_read_commands_on_a_missing_sqlite_store_create_nothing(
    project: Path, command: tuple[str, ...], exchange_zygote: ForkServer
) -> None:
    (project / "exchange.toml").write_text('[store]\nurl = "sqlite:///missing/var/exchange.db"\n')
    line = one_line_error(exchange(project, *command, zygote=exchange_zygote))
    assert f"store file {project / 'missing' / 'var' / 'exchange.db'} does not exist" in line
    assert sorted(p.name for p in project.iterdir()) == ["apps", "exchange.toml"]


def test_cli_start_creates_the_store_that_reads_then_find(project: Path) -> None:
    (project / "exchange.toml").write_text('[store]\nurl = "sqlite:///new/exchange.db"\n')
    started = exchange(project, "start", "bad.noop")
    assert started.returncode == 0, started.stderr
    listed = exchange(project, "runs", "--json")
    assert listed.returncode == 0 and started.stdout.strip() in listed.stdout


@pytest.mark.parametrize("command", [("runs",), ("gateway",)])
def test_cli_a_sqlite_store_with_foreign_tables_is_refused_unchanged(
    project: Path, command: tuple[str, ...], exchange_zygote: ForkServer
) -> None:
    path = _foreign_sqlite(project / "plant.db")
    digest = _sha(path)
    (project / "exchange.toml").write_text('[store]\nurl = "sqlite:///plant.db"\n')
    line = one_line_error(exchange(project, *command, zygote=exchange_zygote))
    assert "holds tables that are not Exchange's (lots, recipe_names, recipes)" in line
    assert _sha(path) == digest


def test_cli_a_postgresql_store_with_foreign_tables_is_refused(
    project: Path, pg_database: tuple[str, str], exchange_zygote: ForkServer
) -> None:
    _, url = pg_database
    _pg_exec(url, "CREATE TABLE lots (id INTEGER)")
    line = one_line_error(
        exchange(project, "start", "bad.noop", env={"EXCHANGE_STORE_URL": url}, zygote=exchange_zygote)
    )
    assert "holds tables that are not Exchange's (lots)" in line and "s3cret-pw" not in line
    assert _pg_tables(url) == {"public.lots"}


def test_cli_shared_true_lets_exchange_share_the_database(project: Path, exchange_zygote: ForkServer) -> None:
    path = _foreign_sqlite(project / "plant.db")
    (project / "exchange.toml").write_text('[store]\nurl = "sqlite:///plant.db"\nshared = true\n')
    started = exchange(project, "start", "bad.noop", zygote=exchange_zygote)
    assert started.returncode == 0, started.stderr
    listed = exchange(project, "runs", "--json", zygote=exchange_zygote)
    assert listed.returncode == 0 and started.stdout.strip() in listed.stdout
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT name FROM recipes").fetchall() == [("bread",)]
    conn.close()


# ----- refused when the tag table and the devices are checked: every command that uses tags, and a
# gateway's start (its preflight) ---------------------------------------------------------------------

MODBUS = '[devices.plc]\ndriver = "modbus"\nhost = "127.0.0.1"\n'
LEVEL = '[tags."[p]Tank/Level"]\ndevice = "plc"\n'


def _serial(name: str, unit: int, **settings: object) -> str:
    extra = "".join(f"{key} = {value!r}\n".replace("'", '"') for key, value in settings.items())
    return (f'[devices.{name}]\ndriver = "modbus"\ntransport = "serial"\nserial_port = "/dev/ttyUSB0"\n'
            f'unit_id = {unit}\n{extra}[tags."[p]{name}/Flow"]\ndevice = "{name}"\naddress = "HR1"\n')


# (id, the config file's text, fragments of the one error line)
START_CASES: list[tuple[str, str, tuple[str, ...]]] = [
    ("access-rw-input-register", MODBUS + LEVEL + 'address = "IRF1"\naccess = "rw"\n',
     ("tags.'[p]Tank/Level'.access = \"rw\": address 'IRF1' of device 'plc' cannot be written over its protocol",
      'leave access out or write "ro"')),
    ("access-rw-discrete-input", MODBUS + LEVEL + 'address = "DI4"\naccess = "rw"\n',
     ("tags.'[p]Tank/Level'.access = \"rw\": address 'DI4'",)),
    ("access-rw-input-register-bit", MODBUS + LEVEL + 'address = "IR10.3"\naccess = "rw"\n',
     ("tags.'[p]Tank/Level'.access = \"rw\": address 'IR10.3'",)),
    ("min-on-a-string", MODBUS + LEVEL + 'address = "HRS10:4"\nmin = 0\n',
     ("tags.'[p]Tank/Level'.min: a String tag has no range (min and max apply to numbers); remove min",)),
    ("min-and-max-on-a-coil", MODBUS + LEVEL + 'address = "C1"\nmin = 0\nmax = 1\n',
     ("tags.'[p]Tank/Level'.min: a Boolean tag has no range", "remove min and max")),
    ("max-on-a-register-bit", MODBUS + LEVEL + 'address = "HR10.3"\nmax = 1\n',
     ("tags.'[p]Tank/Level'.max: a Boolean tag has no range", "remove max")),
    ("max-on-an-opcua-string",
     '[devices.ua]\ndriver = "opcua"\nendpoint = "opc.tcp://127.0.0.1:4840"\n'
     '[tags."[p]Tank/Level"]\ndevice = "ua"\naddress = "ns=2;s=Batch"\ntype = "String"\nmax = 5\n',
     ("tags.'[p]Tank/Level'.max: a String tag has no range",)),
    ("tag-word-order-capitalised", MODBUS + LEVEL + 'address = "HRF1"\nword_order = "Big"\n',
     ("word_order must be one of big, little, got 'Big' (write 'big')",)),
    ("tag-byte-order-upper-case", MODBUS + LEVEL + 'address = "HRF1"\nbyte_order = "LITTLE"\n',
     ("byte_order must be one of big, little, got 'LITTLE' (write 'little')",)),
    ("device-word-order-capitalised", MODBUS + 'word_order = "Big"\n' + LEVEL + 'address = "HRF1"\n',
     ("devices.plc.word_order must be one of big, little, got 'Big' (write 'big')",)),
    ("device-parity-lower-case", _serial("a", 1, parity="e"),
     ("devices.a.parity must be one of N, E, O, got 'e' (write 'E')",)),
    ("serial-port-two-baud-rates", _serial("a", 1, baudrate=19200) + _serial("b", 2, baudrate=9600),
     ("devices.b.baudrate is 9600 but device 'a' on the same serial_port '/dev/ttyUSB0' has 19200",
      "the devices of one port share its baud rate, parity, stop bits and byte size")),
    ("serial-port-default-against-given-baud-rate", _serial("a", 1) + _serial("b", 2, baudrate=38400),
     ("devices.b.baudrate is 38400 but device 'a' on the same serial_port '/dev/ttyUSB0' has 19200",)),
    ("serial-port-two-parities", _serial("a", 1, parity="E") + _serial("b", 2, parity="N"),
     ("devices.b.parity is 'N' but device 'a' on the same serial_port '/dev/ttyUSB0' has 'E'",)),
    ("serial-port-two-stop-bits", _serial("a", 1, stopbits=1) + _serial("b", 2, stopbits=2),
     ("devices.b.stopbits is 2 but device 'a'",)),
]


@pytest.mark.parametrize(("text", "fragments"), [case[1:] for case in START_CASES],
                         ids=[case[0] for case in START_CASES])
def test_cli_a_tag_or_device_the_protocol_cannot_honour_is_one_line_naming_the_key(
    project: Path, text: str, fragments: tuple[str, ...], exchange_zygote: ForkServer
) -> None:
    (project / "exchange.toml").write_text(text)
    before = _tree(project)
    line = one_line_error(exchange(project, "tags", "list", zygote=exchange_zygote))
    for fragment in fragments:
        assert fragment in line
    assert _tree(project) == before


def test_cli_the_gateway_refuses_devices_that_disagree_on_a_serial_port_before_it_starts(
    project: Path, exchange_zygote: ForkServer
) -> None:
    """The gateway checks every device, a device without tags too, before its store or API opens."""
    text = _serial("a", 1, baudrate=19200) + _serial("b", 2, baudrate=9600).split("[tags.")[0]
    (project / "exchange.toml").write_text('[store]\nurl = "sqlite:///var/x.db"\n' + text)
    line = one_line_error(exchange(project, "gateway", zygote=exchange_zygote))
    assert "devices.b.baudrate is 9600 but device 'a' on the same serial_port '/dev/ttyUSB0' has 19200" in line


def test_cli_an_input_register_without_access_is_listed_read_only(project: Path, exchange_zygote: ForkServer) -> None:
    """Unset, access follows the protocol: an input register is simply read-only, not an error."""
    (project / "exchange.toml").write_text(MODBUS + LEVEL + 'address = "IRF1"\n')
    listed = exchange(project, "tags", "list", "--json", zygote=exchange_zygote)
    assert listed.returncode == 0, listed.stderr
    assert '"writable": false' in listed.stdout and '"access": "rw"' in listed.stdout
