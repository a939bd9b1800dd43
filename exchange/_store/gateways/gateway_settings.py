"""Gateway-wide settings in the store (``exchange_control``), one JSON value per key, with who set it
and when; every gateway reads them, so a setting made anywhere holds everywhere."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, insert, select, update
from sqlalchemy.exc import IntegrityError

from exchange._store import codec
from exchange._store.sql import Database
from exchange._store.tables import control
from exchange.errors import StoreDataError

MAINTENANCE = "maintenance"
RETENTION = "retention"
# the runs retention could not archive on its last pass ({"runs", "first", "error"}; runs 0: none)
RETENTION_ARCHIVE = "retention_archive"


@dataclass(frozen=True)
class Setting:
    key: str
    value: Any
    set_by: str
    set_at: float


def read_setting(conn: Connection, key: str) -> Setting | None:
    """The setting ``key`` inside the caller's transaction."""
    row = conn.execute(select(control).where(control.c.key == key)).first()
    return None if row is None else Setting(row.key, codec.loads(row.value), row.set_by, row.set_at)


def is_draining(setting: Setting | None) -> bool:
    """Whether the maintenance setting says start nothing new."""
    return setting is not None and is_draining_value(setting.value)


def is_draining_value(value: Any) -> bool:
    """:func:`is_draining` for the setting's value alone (a claim reads it in its own statement)."""
    return isinstance(value, dict) and value.get("mode") in DRAINING_MODES


DRAINING_MODES = ("drain", "cancel")


class ControlTable:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, key: str) -> Setting | None:
        with self.db.read() as conn:
            return read_setting(conn, key)

    def put(self, key: str, value: Any, *, actor: str) -> Setting:
        """Set ``key`` to ``value`` (JSON) for every gateway; returns the stored setting."""
        text = codec.dumps(value)
        for attempt in (1, 2):  # two first settings of a key at once: the second one updates
            now = self.db.clock.now()
            try:
                with self.db.transaction(f"the setting {key}") as conn:
                    done = conn.execute(update(control).where(control.c.key == key)
                                        .values(value=text, set_by=actor, set_at=now)).rowcount
                    if not done:
                        conn.execute(insert(control).values(key=key, value=text, set_by=actor, set_at=now))
                    self.db.sql.mail.announce_runs_changed(conn)  # gateways look at their queues again at once
            except StoreDataError as exc:
                if attempt == 2 or not isinstance(exc.__cause__, IntegrityError):
                    raise
                continue
            break
        return Setting(key, value, actor, now)

    def take_if_older(self, key: str, value: Any, *, actor: str, older_than: float) -> bool:
        """Set ``key`` only when it was last set before store time ``older_than`` (or never): of
        gateways asking at once, exactly one gets True (a periodic job's lease)."""
        now = self.db.clock.now()
        text = codec.dumps(value)
        try:
            with self.db.transaction(f"the lease {key}") as conn:
                done = conn.execute(update(control).where(control.c.key == key, control.c.set_at < older_than)
                                    .values(value=text, set_by=actor, set_at=now)).rowcount
                if done:
                    return True
                if read_setting(conn, key) is not None:
                    return False
                conn.execute(insert(control).values(key=key, value=text, set_by=actor, set_at=now))
        except StoreDataError as exc:
            if isinstance(exc.__cause__, IntegrityError):
                return False  # another gateway inserted it first: it has the lease
            raise
        return True
