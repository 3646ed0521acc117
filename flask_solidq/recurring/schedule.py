"""Recurring schedules: cron expressions and a few English phrases, with an optional time zone.

The grammar (case-insensitive, words separated by spaces)::

    schedule  := (cron | phrase) [zone]

    cron      := five fields     "minute hour day-of-month month day-of-week"  ("*/5 * * * *")
               | six fields      "second minute hour day-of-month month day-of-week"
                                 (seconds first, as fugit and Quartz write them)
               | @yearly | @annually | @monthly | @weekly | @daily | @midnight | @hourly

    phrase    := every second
               | every N seconds                     N divides 60
               | every minute
               | every N minutes                     N divides 60
               | every hour [at minute M]            M in 0-59
               | every N hours [at minute M]         N divides 24
               | every day [at TIME]
               | every weekday [at TIME]             Monday to Friday
               | every DAYNAME [at TIME]             monday ... sunday, or mon ... sun
               | every week [at TIME]                Sundays, like @weekly
               | every month [on day D] [at TIME]    D in 1-31 (also "on the 15th"); day 1
                                                     by default; months without day D are
                                                     skipped, as cron does

    TIME      := H am | H pm | H:MM am | H:MM pm     H in 1-12 ("9am", "9:30 pm", "12am")
               | HH:MM                               24-hour clock ("15:00", "9:05")
               | noon | midnight                     the default is midnight
    zone      := an IANA time zone ("Europe/Paris", "America/New_York", "UTC"); UTC by default

Each phrase is a cron expression in disguise (``every weekday at 9am`` is ``0 9 * * 1-5``), so
both forms follow the same rules. Cron fields take what croniter takes (names, ranges, steps,
``L`` and ``#``) except ``R`` and ``H``: a random or hashed field would let two schedulers pick
different ticks. Phrases that cron can't space evenly (``every 7 minutes``, ``every 5 days``)
are refused rather than approximated.

Times are computed on the zone's wall clock and returned in UTC. Where a daylight saving change
skips a wall-clock time, a tick due in the gap fires when the clocks jump. Where the clocks go
back, schedules with a ``*`` in the minute or hour field tick through both passes of the
repeated hour; schedules fixed to an hour and minute (``30 2 * * *``) fire once, in the first
pass, as Vixie cron does.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import re
import zoneinfo

import croniter

from flask_solidq.timing import UTC
from flask_solidq.timing import as_utc

ACCEPTED_FORMS = (
    'a cron expression ("*/5 * * * *", or six fields with seconds first, or @daily), or'
    ' "every second", "every N seconds", "every minute", "every N minutes", "every hour",'
    ' "every hour at minute 27", "every N hours", "every day", "every day at 9:30pm",'
    ' "every weekday at 9am", "every monday at 8am", "every week", "every month",'
    ' "every month on day 1 at 2am"; N must divide 60 (24 for hours); optionally followed by'
    ' an IANA time zone such as "Europe/Paris"'
)

_DAYS = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
_SHORTCUTS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
# A word with a letter after a slash can't be a cron field (steps are numbers): a zone, then.
_REGION_CITY = re.compile(r"[A-Za-z][\w+\-]*(?:/[A-Za-z][\w+\-]*)+")

_TIME = r"(?P<time>noon|midnight|\d{1,2}(?::\d{2})?\s*(?:am|pm)|\d{1,2}:\d{2})"
_AT_TIME = rf"(?:\s+at\s+{_TIME})?"
_PHRASES = [
    (re.compile(pattern), name)
    for pattern, name in (
        (r"every (?P<n>\d+ )?seconds?", "seconds"),
        (r"every (?P<n>\d+ )?minutes?", "minutes"),
        (r"every (?P<n>\d+ )?hours?(?: at minute (?P<minute>\d{1,2}))?", "hours"),
        (rf"every day{_AT_TIME}", "day"),
        (rf"every weekday{_AT_TIME}", "weekday"),
        (rf"every (?P<day>[a-z]+){_AT_TIME}", "dayname"),
        (rf"every week{_AT_TIME}", "week"),
        (
            r"every month(?: on (?:day |the )?(?P<dom>\d{1,2})(?:st|nd|rd|th)?)?" + _AT_TIME,
            "month",
        ),
    )
]


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A parsed schedule: when a recurring task's ticks fall.

    Build one with :meth:`parse`. ``text`` is what was written, ``cron`` the cron expression
    it means (six fields when it has seconds, seconds first) and ``zone`` the IANA zone its
    wall-clock times are in.
    """

    text: str
    cron: str
    zone: str = "UTC"

    @classmethod
    def parse(cls, text: str) -> Schedule:
        """Parse ``text`` (see the module docstring for the grammar).

        :raises ValueError: ``text`` isn't a schedule, or one that never fires; the message
            quotes it and lists the accepted forms.
        """
        if not isinstance(text, str):
            raise TypeError(f"A schedule must be a string, not {type(text).__name__}.")
        try:
            body, zone = _split_zone(" ".join(text.split()))
            cron = _cron_for(body)
            schedule = cls(text=text, cron=cron, zone=zone)
            schedule.next_time_after(dt.datetime(2000, 1, 1, tzinfo=UTC))
        except croniter.CroniterBadDateError:
            raise ValueError(
                f"The schedule {text!r} never fires: no date matches it. Write {ACCEPTED_FORMS}."
            ) from None
        except ValueError as exc:
            raise ValueError(
                f"Can't read the schedule {text!r}: {exc}. Write {ACCEPTED_FORMS}."
            ) from None
        return schedule

    def __str__(self) -> str:
        return self.text

    @property
    def tzinfo(self) -> dt.tzinfo:
        """The zone the cron fields are read in."""
        return _zone(self.zone)

    def next_time_after(self, moment: dt.datetime) -> dt.datetime:
        """The first tick strictly after ``moment``, as an aware UTC datetime.

        ``moment`` may be in any zone; a naive one is taken to be UTC.
        """
        moment = as_utc(moment)
        ticks = self._iterate(moment)
        while True:
            tick = self._to_utc(ticks.get_next(dt.datetime))
            if tick > moment and self._fires_at(tick):
                return tick

    def previous_time(self, moment: dt.datetime) -> dt.datetime:
        """The last tick at or before ``moment``, as an aware UTC datetime."""
        moment = as_utc(moment)
        # croniter looks strictly before its start, so start just after to include moment.
        ticks = self._iterate(moment + dt.timedelta(microseconds=1))
        while True:
            tick = self._to_utc(ticks.get_prev(dt.datetime))
            if tick <= moment and self._fires_at(tick):
                return tick

    def _iterate(self, start: dt.datetime) -> croniter.croniter:
        return croniter.croniter(
            self.cron,
            start.astimezone(self.tzinfo),
            second_at_beginning=self._has_seconds,
        )

    @property
    def _has_seconds(self) -> bool:
        return len(self.cron.split()) == 6

    @staticmethod
    def _to_utc(tick: dt.datetime) -> dt.datetime:
        # croniter returns ticks in the start's zone; UTC is what the ledger compares.
        return tick.astimezone(UTC)

    def _fires_at(self, tick: dt.datetime) -> bool:
        """Whether ``tick`` counts: not the second pass of a repeated wall-clock time for a
        schedule fixed to an hour and minute (croniter would fire those twice)."""
        local = tick.astimezone(self.tzinfo)
        second_pass = local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()
        return not (second_pass and self._is_fixed_time)

    @property
    def _is_fixed_time(self) -> bool:
        fields = self.cron.split()
        if len(fields) < 5:  # the @ shortcuts: all but @hourly fix the hour and the minute
            return self.cron != "@hourly"
        minute, hour = fields[-5], fields[-4]
        return not (minute.startswith("*") or hour.startswith("*"))


def _split_zone(text: str) -> tuple[str, str]:
    """Split a trailing IANA zone off ``text``; the zone defaults to UTC.

    :raises ValueError: the last word is meant as a zone (``Region/City``) but names none.
    """
    body, _, last = text.rpartition(" ")
    if not body:
        return text, "UTC"
    key = _zone_keys_by_lowercase().get(last.lower())
    if key is not None:
        return body, key
    if _REGION_CITY.fullmatch(last):
        raise ValueError(f"there is no time zone {last!r}")
    return text, "UTC"


@functools.cache
def _zone_keys_by_lowercase() -> dict[str, str]:
    """Every IANA zone key, by its lowercase form, so zones match without regard to case."""
    return {key.lower(): key for key in zoneinfo.available_timezones() | {"UTC"}}


@functools.lru_cache(maxsize=64)
def _zone(key: str) -> dt.tzinfo:
    return UTC if key == "UTC" else zoneinfo.ZoneInfo(key)


def _cron_for(body: str) -> str:
    """The cron expression ``body`` means.

    :raises ValueError: it's neither a cron expression nor a phrase of the grammar.
    """
    lowered = body.lower()
    if lowered.startswith("every "):
        return _phrase_to_cron(lowered)
    return _checked_cron(lowered)


def _checked_cron(expression: str) -> str:
    if expression in _SHORTCUTS:
        return expression
    fields = expression.split()
    if len(fields) not in (5, 6):
        raise ValueError(f"a cron expression has 5 or 6 fields, not {len(fields)}")
    for field in fields:
        for part in field.split(","):
            if part[:1] in ("r", "h"):
                raise ValueError("random (R) and hashed (H) cron fields aren't supported")
    if not croniter.croniter.is_valid(expression, second_at_beginning=len(fields) == 6):
        raise ValueError("croniter can't parse it")
    return expression


def _phrase_to_cron(phrase: str) -> str:
    for pattern, name in _PHRASES:
        match = pattern.fullmatch(phrase)
        if match is not None and (name != "dayname" or _day_number(match["day"]) is not None):
            return _BUILDERS[name](match)
    raise ValueError("it matches none of the accepted forms")


def _every_n_seconds(match: re.Match[str]) -> str:
    return f"{_step(match, 60, 'seconds')} * * * * *"


def _every_n_minutes(match: re.Match[str]) -> str:
    return f"{_step(match, 60, 'minutes')} * * * *"


def _every_n_hours(match: re.Match[str]) -> str:
    minute = _bounded(match["minute"] or "0", 0, 59, "minute")
    return f"{minute} {_step(match, 24, 'hours')} * * *"


def _step(match: re.Match[str], cycle: int, unit: str) -> str:
    """``*`` or ``*/N`` for "every N units", refusing an N that cron can't space evenly."""
    if match["n"] is None:
        return "*"
    n = int(match["n"])
    if n < 1 or cycle % n:
        raise ValueError(f"every {n} {unit} can't be evenly spaced: N must divide {cycle}")
    return "*" if n == 1 else f"*/{n}"


def _every_day(match: re.Match[str], days: str = "*") -> str:
    hour, minute = _time_of_day(match["time"])
    return f"{minute} {hour} * * {days}"


def _every_dayname(match: re.Match[str]) -> str:
    return _every_day(match, str(_day_number(match["day"])))


def _every_month(match: re.Match[str]) -> str:
    hour, minute = _time_of_day(match["time"])
    day = _bounded(match["dom"] or "1", 1, 31, "day of the month")
    return f"{minute} {hour} {day} * *"


def _day_number(word: str) -> int | None:
    for number, day in enumerate(_DAYS):
        if word in (day, day[:3]):
            return number
    return None


def _time_of_day(text: str | None) -> tuple[int, int]:
    """(hour, minute) of a TIME; midnight when there is none."""
    if text is None or text == "midnight":
        return 0, 0
    if text == "noon":
        return 12, 0
    clock = re.fullmatch(r"(\d{1,2})(?::(\d{2}))?\s*(am|pm)?", text)
    assert clock is not None  # the phrase patterns only let TIMEs through
    hour, minute, half = int(clock[1]), _bounded(clock[2] or "0", 0, 59, "minute"), clock[3]
    if half is None:
        return _bounded(str(hour), 0, 23, "hour"), minute
    hour = _bounded(str(hour), 1, 12, "hour on a 12-hour clock") % 12
    return hour + (12 if half == "pm" else 0), minute


def _bounded(text: str, low: int, high: int, what: str) -> int:
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"the {what} must be {low} to {high}, not {value}")
    return value


_BUILDERS = {
    "seconds": _every_n_seconds,
    "minutes": _every_n_minutes,
    "hours": _every_n_hours,
    "day": _every_day,
    "weekday": lambda match: _every_day(match, "1-5"),
    "dayname": _every_dayname,
    "week": lambda match: _every_day(match, "0"),
    "month": _every_month,
}
