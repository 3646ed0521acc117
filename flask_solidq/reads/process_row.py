"""A ``solidq_processes`` row as the read side reads it: the columns the dashboard's process
page, ``flask solidq health`` and ``flask solidq status`` show or judge."""

from __future__ import annotations

import datetime as dt
import typing as t


class ProcessRow(t.Protocol):
    """A registered process: what it is, where it runs, who supervises it, and when it last
    heartbeat, and the operator's command it carries out (quiet, stop), if any."""

    @property
    def id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def pid(self) -> int: ...
    @property
    def hostname(self) -> str | None: ...
    @property
    def supervisor_id(self) -> int | None: ...
    @property
    def last_heartbeat_at(self) -> dt.datetime: ...
    @property
    def command(self) -> str | None: ...
