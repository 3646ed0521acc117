"""The records of the subscriber's lines: what ``Logger.makeRecord`` makes, for less.

A worker logs two lines per job, and making their records cost a tenth of its CPU per job:
``LogRecord.__init__`` splits the same path into ``filename`` and ``module`` for every line,
sets some twenty attributes one by one, and ``makeRecord`` then checks each field of
``extra=`` against the record in a Python loop. :func:`make_record` makes the same record,
attribute for attribute and in the same order (a formatter listing a record's fields sees
them as before): the path's parts computed once per path, the attributes in one dict, and
``extra=`` checked in one set operation.

Only when nothing could tell the difference: a logger class or instance with its own
``makeRecord``, or a record factory of the app's (``logging.setLogRecordFactory``), gets
the standard path; so do the module's switches (``logging.logThreads`` and the like) turned
off, and a Python whose ``LogRecord.__init__`` this module wasn't checked against (3.10 to
3.13: 3.12 added ``taskName``, 3.13 reads the clock in nanoseconds).
"""

from __future__ import annotations

import collections.abc
import logging
import os
import sys
import threading
import time
import typing as t

#: The ``makeRecord`` and ``LogRecord.__init__`` whose records :func:`make_record` copies.
_STANDARD_MAKE_RECORD = logging.Logger.makeRecord
_STANDARD_INIT = logging.LogRecord.__init__
_STANDARD_GET_MESSAGE = logging.LogRecord.getMessage
#: The Pythons whose ``LogRecord.__init__`` this module copies.
_CHECKED = (3, 10) <= sys.version_info[:2] <= (3, 13)
_CLOCK_IN_NS = sys.version_info >= (3, 13)
_TASK_NAME = sys.version_info >= (3, 12)
#: What ``makeRecord`` never lets ``extra=`` set, besides the record's own attributes.
_RESERVED = frozenset({"message", "asctime"})
#: The attributes of a record :func:`_new_record` makes, and :data:`_RESERVED`.
_ATTRIBUTES = _RESERVED | {
    *("name", "msg", "args", "levelname", "levelno", "pathname", "filename", "module"),
    *("exc_info", "exc_text", "stack_info", "lineno", "funcName", "created", "msecs"),
    *("relativeCreated", "thread", "threadName", "processName", "process", "taskName"),
}

#: The logging module's namespace: its ``_startTime`` (when it was imported, which
#: ``relativeCreated`` counts from) is not in the type stubs.
_LOGGING: dict[str, t.Any] = vars(logging)  # Any: a module's namespace

#: The template of :func:`_new_record`'s records, for each path a record was made for (the
#: subscriber's one file).
_templates: dict[str, dict[str, object]] = {}


def make_record(
    logger: logging.Logger,
    level: int,
    pathname: str,
    lineno: int,
    msg: str,
    args: tuple[object, ...],
    func: str,
    extra: t.Mapping[str, object],
) -> logging.LogRecord:
    """``logger.makeRecord(logger.name, level, pathname, lineno, msg, args, None, func,
    extra)``: the same record, made for less when the logger and the record factory are
    the standard ones."""
    if getattr(logger.makeRecord, "__func__", None) is _STANDARD_MAKE_RECORD:
        factory = logging.getLogRecordFactory()
        if factory is logging.LogRecord and _plain() and _ATTRIBUTES.isdisjoint(extra):
            return _new_record(logger.name, level, pathname, lineno, msg, args, func, extra)
        record = factory(logger.name, level, pathname, lineno, msg, args, None, func, None)
        fields = record.__dict__
        if _RESERVED.isdisjoint(extra) and fields.keys().isdisjoint(extra):
            fields.update(extra)
            return record
    # The app's makeRecord, or a field the record has (makeRecord's own KeyError).
    return logger.makeRecord(logger.name, level, pathname, lineno, msg, args, None, func, extra)


def is_standard(logger: logging.Logger) -> bool:
    """Whether ``logger`` would make ``LogRecord``'s own records, whose message is
    ``LogRecord.getMessage``'s: no ``makeRecord``, record factory or ``LogRecord`` of the
    app's."""
    return (
        getattr(logger.makeRecord, "__func__", None) is _STANDARD_MAKE_RECORD
        and logging.getLogRecordFactory() is logging.LogRecord
        and logging.LogRecord.__init__ is _STANDARD_INIT
        and logging.LogRecord.getMessage is _STANDARD_GET_MESSAGE
    )


def is_extra(fields: t.Mapping[str, object]) -> bool:
    """Whether ``fields`` (and an ``event``) could be a record's ``extra=`` without a
    ``KeyError``: none of them is one of a record's own attributes."""
    return _ATTRIBUTES.isdisjoint(fields)


def _plain() -> bool:
    """Whether a ``LogRecord`` made now is the one :func:`_new_record` makes."""
    return (
        _CHECKED
        and logging.LogRecord.__init__ is _STANDARD_INIT
        and logging.logThreads
        and logging.logMultiprocessing
        and logging.logProcesses
    )


def _new_record(
    name: str,
    level: int,
    pathname: str,
    lineno: int,
    msg: str,
    args: tuple[object, ...],
    func: str,
    extra: t.Mapping[str, object],
) -> logging.LogRecord:
    """``logging.LogRecord(name, level, pathname, lineno, msg, args, None, func)``, its
    attributes set in the order ``LogRecord.__init__`` sets them, then ``extra``'s (none of
    them a record's own: the caller checked)."""
    created, msecs, relative = clock()
    record_args: tuple[object, ...] | t.Mapping[str, object] = args
    if len(args) == 1 and isinstance(args[0], collections.abc.Mapping) and args[0]:
        record_args = args[0]
    template = _templates.get(pathname)
    if template is None:
        template = _templates.setdefault(pathname, _template(pathname))
    # A copy of the template keeps its order; each key set below is already there.
    fields = template.copy()
    fields["name"] = name
    fields["msg"] = msg
    fields["args"] = record_args
    fields["levelname"] = logging.getLevelName(level)
    fields["levelno"] = level
    fields["lineno"] = lineno
    fields["funcName"] = func
    fields["created"] = created
    fields["msecs"] = msecs
    fields["relativeCreated"] = relative
    fields["thread"] = threading.get_ident()
    fields["threadName"] = threading.current_thread().name
    fields["processName"] = _process_name()
    fields["process"] = os.getpid()
    if _TASK_NAME:
        fields["taskName"] = _task_name()
    fields.update(extra)
    record = logging.LogRecord.__new__(logging.LogRecord)
    record.__dict__ = fields
    return record


def clock() -> tuple[float, float, float]:
    """A record's ``created``, ``msecs`` and ``relativeCreated`` if it were made now, read
    from the clock as ``LogRecord.__init__`` reads it."""
    if _CLOCK_IN_NS:
        ns = time.time_ns()
        created = ns / 1e9
        msecs = (ns % 1_000_000_000) // 1_000_000 + 0.0
        if msecs == 999.0 and int(created) != ns // 1_000_000_000:
            msecs = 0.0
        return created, msecs, (ns - _LOGGING["_startTime"]) / 1e6
    created = time.time()
    msecs = int((created - int(created)) * 1000) + 0.0
    return created, msecs, (created - _LOGGING["_startTime"]) * 1000


def _template(pathname: str) -> dict[str, object]:
    """The attributes of a record logged from ``pathname``, in ``LogRecord.__init__``'s
    order: its path's parts and the fields no job line sets (no traceback, no stack) filled
    in, the others left for :func:`_new_record` to set."""
    try:
        filename = os.path.basename(pathname)
        module = os.path.splitext(filename)[0]
    except (TypeError, ValueError, AttributeError):  # as LogRecord.__init__
        filename, module = pathname, "Unknown module"
    template: dict[str, object] = dict.fromkeys(("name", "msg", "args", "levelname", "levelno"))
    template.update(pathname=pathname, filename=filename, module=module)
    template.update(exc_info=None, exc_text=None, stack_info=None)
    template.update(dict.fromkeys(("lineno", "funcName", "created", "msecs")))
    template.update(dict.fromkeys(("relativeCreated", "thread", "threadName", "processName")))
    template["process"] = None
    if _TASK_NAME:
        template["taskName"] = None
    return template


def _process_name() -> str:
    """``LogRecord.processName``: multiprocessing's name of this process, once imported."""
    mp = sys.modules.get("multiprocessing")
    if mp is not None:
        try:
            name: str = mp.current_process().name
            return name
        except Exception:  # noqa: BLE001 - as LogRecord: multiprocessing half imported
            pass
    return "MainProcess"


def _task_name() -> str | None:
    """``LogRecord.taskName`` (Python 3.12+): the running asyncio task's name, if any."""
    if not getattr(logging, "logAsyncioTasks", True):
        return None
    asyncio = sys.modules.get("asyncio")
    if asyncio:
        try:
            task: str = asyncio.current_task().get_name()
            return task
        except Exception:  # noqa: BLE001 - as LogRecord: no running loop
            pass
    return None
