"""The SOLIDQ_* configuration keys: defaults filled into the config, parsing, and errors that
name the key (API.md section 1)."""

from __future__ import annotations

import datetime as dt

import pytest

from flask_solidq.config import DEFAULTS
from flask_solidq.config import DispatcherSettings
from flask_solidq.config import RecurringSettings
from flask_solidq.config import WorkerSettings
from flask_solidq.config import load_settings
from flask_solidq.config import parse_queues

API_DEFAULTS = {
    "SOLIDQ_BIND": None,
    "SOLIDQ_ADAPTER": "solidq",
    "SOLIDQ_RECURRING": {},
    "SOLIDQ_PROCESS_HEARTBEAT_INTERVAL": 60,
    "SOLIDQ_PROCESS_ALIVE_THRESHOLD": 300,
    "SOLIDQ_SHUTDOWN_TIMEOUT": 5,
    "SOLIDQ_ON_WORKER_DEATH": "fail",
    "SOLIDQ_USE_SKIP_LOCKED": True,
    "SOLIDQ_PRESERVE_FINISHED_JOBS": True,
    "SOLIDQ_CLEAR_FINISHED_JOBS_AFTER": 86400,
    "SOLIDQ_DASHBOARD": True,
    "SOLIDQ_DASHBOARD_URL_PREFIX": "/solidq",
    "SOLIDQ_DASHBOARD_BASIC_AUTH": None,
    "SOLIDQ_DATABASE_CONNECT_TIMEOUT": 10,
    "SOLIDQ_DATABASE_DEAD_CONNECTION_TIMEOUT": 30,
    "SOLIDQ_DATABASE_STATEMENT_TIMEOUT": 30,
    "SOLIDQ_DATABASE_PRE_PING": False,
}


def test_load_settings_fills_every_default_into_the_config():
    config = {}
    load_settings(config)
    assert set(DEFAULTS) <= set(config)
    for key, value in API_DEFAULTS.items():
        assert config[key] == value, key
    assert config["SOLIDQ_WORKERS"] == [
        {"queues": "*", "threads": 3, "processes": 1, "polling_interval": 0.1, "prefetch": 100}
    ]
    (dispatcher,) = config["SOLIDQ_DISPATCHERS"]
    assert dispatcher["polling_interval"] == 1
    assert dispatcher["batch_size"] == 500
    assert dispatcher["concurrency_maintenance_interval"] == 600


def test_load_settings_keeps_the_values_already_set():
    config = {"SOLIDQ_ADAPTER": "inline", "SOLIDQ_SHUTDOWN_TIMEOUT": 12, "OTHER": "kept"}
    settings = load_settings(config)
    assert config["SOLIDQ_ADAPTER"] == "inline"
    assert config["SOLIDQ_SHUTDOWN_TIMEOUT"] == 12
    assert config["OTHER"] == "kept"
    assert settings.adapter == "inline"
    assert settings.shutdown_timeout == 12.0


def test_default_settings_parse_to_the_documented_values():
    settings = load_settings({})
    assert settings.bind is None
    assert settings.adapter == "solidq"
    assert settings.workers == (
        WorkerSettings(queues=("*",), threads=3, processes=1, polling_interval=0.1),
    )
    (dispatcher,) = settings.dispatchers
    assert isinstance(dispatcher, DispatcherSettings)
    assert dispatcher.polling_interval == 1.0
    assert dispatcher.batch_size == 500
    assert dispatcher.concurrency_maintenance_interval == 600.0
    assert settings.recurring == ()
    assert settings.process_heartbeat_interval == 60.0
    assert settings.process_alive_threshold == 300.0
    assert settings.shutdown_timeout == 5.0
    assert settings.on_worker_death == "fail"
    assert settings.use_skip_locked is True
    assert settings.preserve_finished_jobs is True
    assert settings.clear_finished_jobs_after == 86400.0
    assert settings.dashboard is True
    assert settings.dashboard_url_prefix == "/solidq"
    assert settings.dashboard_basic_auth is None


def test_changing_one_apps_filled_in_defaults_leaves_other_apps_defaults_alone():
    first = {}
    load_settings(first)
    first["SOLIDQ_WORKERS"][0]["threads"] = 9
    first["SOLIDQ_DISPATCHERS"].append({"batch_size": 1})
    first["SOLIDQ_RECURRING"]["leak"] = {"job": "m:f", "schedule": "every minute"}

    second = {}
    settings = load_settings(second)
    assert settings.workers[0].threads == 3
    assert len(settings.dispatchers) == 1
    assert settings.recurring == ()
    assert second["SOLIDQ_RECURRING"] == {}


@pytest.mark.parametrize("adapter", ["solidq", "inline", "test"])
def test_every_adapter_is_accepted(adapter):
    assert load_settings({"SOLIDQ_ADAPTER": adapter}).adapter == adapter


def test_on_worker_death_release_is_accepted():
    assert load_settings({"SOLIDQ_ON_WORKER_DEATH": "release"}).on_worker_death == "release"


def test_bind_names_a_bind():
    assert load_settings({"SOLIDQ_BIND": "queue"}).bind == "queue"


@pytest.mark.parametrize(
    "key, attribute",
    [
        ("SOLIDQ_PROCESS_HEARTBEAT_INTERVAL", "process_heartbeat_interval"),
        ("SOLIDQ_PROCESS_ALIVE_THRESHOLD", "process_alive_threshold"),
        ("SOLIDQ_SHUTDOWN_TIMEOUT", "shutdown_timeout"),
        ("SOLIDQ_CLEAR_FINISHED_JOBS_AFTER", "clear_finished_jobs_after"),
    ],
)
def test_durations_accept_timedelta_and_numbers(key, attribute):
    assert getattr(load_settings({key: dt.timedelta(minutes=2)}), attribute) == 120.0
    assert getattr(load_settings({key: 1.5}), attribute) == 1.5
    assert getattr(load_settings({key: 7}), attribute) == 7.0


def test_shutdown_timeout_may_be_zero():
    assert load_settings({"SOLIDQ_SHUTDOWN_TIMEOUT": 0}).shutdown_timeout == 0.0


def test_worker_and_dispatcher_durations_accept_timedelta():
    settings = load_settings(
        {
            "SOLIDQ_WORKERS": [{"polling_interval": dt.timedelta(milliseconds=250)}],
            "SOLIDQ_DISPATCHERS": [
                {
                    "polling_interval": dt.timedelta(seconds=2),
                    "concurrency_maintenance_interval": dt.timedelta(minutes=5),
                }
            ],
        }
    )
    assert settings.workers[0].polling_interval == 0.25
    assert settings.dispatchers[0].polling_interval == 2.0
    assert settings.dispatchers[0].concurrency_maintenance_interval == 300.0


@pytest.mark.parametrize(
    "queues, expected",
    [
        ("*", ("*",)),
        ("high,low", ("high", "low")),
        (" high , low ,default ", ("high", "low", "default")),
        ("real_time,background*", ("real_time", "background*")),
        (["high", "low"], ("high", "low")),
        (("low", "high"), ("low", "high")),
        (["a", "b", "a"], ("a", "b")),
        ("a,,b,", ("a", "b")),
    ],
)
def test_worker_queues_accept_a_comma_string_and_a_list_in_priority_order(queues, expected):
    settings = load_settings({"SOLIDQ_WORKERS": [{"queues": queues}]})
    assert settings.workers[0].queues == expected
    assert parse_queues(queues, name="queues") == expected


def test_a_single_dict_for_workers_is_accepted_and_missing_keys_take_defaults():
    settings = load_settings({"SOLIDQ_WORKERS": {"queues": "mail", "threads": 5}})
    assert settings.workers == (
        WorkerSettings(queues=("mail",), threads=5, processes=1, polling_interval=0.1),
    )


def test_a_worker_prefetch_of_zero_claims_for_idle_threads_only():
    settings = load_settings({"SOLIDQ_WORKERS": {"prefetch": 0}})
    assert settings.workers[0].prefetch == 0
    assert load_settings({}).workers[0].prefetch == 100


def test_a_single_dict_for_dispatchers_is_accepted():
    settings = load_settings({"SOLIDQ_DISPATCHERS": {"batch_size": 50}})
    (dispatcher,) = settings.dispatchers
    assert dispatcher.batch_size == 50
    assert dispatcher.polling_interval == 1.0


def test_several_workers_are_parsed_in_order():
    settings = load_settings(
        {
            "SOLIDQ_WORKERS": [
                {"queues": "high", "threads": 1},
                {"queues": ["low", "default"], "processes": 2, "polling_interval": 1},
            ]
        }
    )
    assert [worker.queues for worker in settings.workers] == [("high",), ("low", "default")]
    assert [worker.threads for worker in settings.workers] == [1, 3]
    assert [worker.processes for worker in settings.workers] == [1, 2]


def test_recurring_tasks_are_parsed():
    settings = load_settings(
        {
            "SOLIDQ_RECURRING": {
                "cleanup": {
                    "job": "app.jobs:cleanup",
                    "schedule": "every hour",
                    "args": [1, "x"],
                    "kwargs": {"dry_run": True},
                    "queue": "maintenance",
                    "priority": 5,
                    "description": "Clear old rows",
                },
                "ping": {"job": "app.jobs:ping", "schedule": "*/5 * * * *"},
            }
        }
    )
    cleanup, ping = settings.recurring
    assert cleanup == RecurringSettings(
        key="cleanup",
        job="app.jobs:cleanup",
        schedule="every hour",
        args=(1, "x"),
        kwargs={"dry_run": True},
        queue="maintenance",
        priority=5,
        description="Clear old rows",
    )
    assert (ping.key, ping.job, ping.schedule) == ("ping", "app.jobs:ping", "*/5 * * * *")
    assert (ping.args, ping.kwargs, ping.queue, ping.priority) == ((), {}, None, None)


def test_basic_auth_accepts_a_pair_as_tuple_or_list():
    config = {"SOLIDQ_DASHBOARD_BASIC_AUTH": ["admin", "secret"]}
    assert load_settings(config).dashboard_basic_auth == ("admin", "secret")
    config = {"SOLIDQ_DASHBOARD_BASIC_AUTH": ("admin", "secret")}
    assert load_settings(config).dashboard_basic_auth == ("admin", "secret")


@pytest.mark.parametrize(
    "prefix, expected",
    [("/solidq", "/solidq"), ("/admin/jobs/", "/admin/jobs"), ("/", "/")],
)
def test_dashboard_url_prefix_is_a_path(prefix, expected):
    settings = load_settings({"SOLIDQ_DASHBOARD_URL_PREFIX": prefix})
    assert settings.dashboard_url_prefix == expected


def test_the_dashboard_can_be_turned_off():
    assert load_settings({"SOLIDQ_DASHBOARD": False}).dashboard is False


WORKER = "SOLIDQ_WORKERS"
DISPATCHER = "SOLIDQ_DISPATCHERS"
RECURRING = "SOLIDQ_RECURRING"


@pytest.mark.parametrize(
    "key, value, names",
    [
        ("SOLIDQ_ADAPTER", "redis", []),
        ("SOLIDQ_ADAPTER", None, []),
        ("SOLIDQ_BIND", 5, []),
        ("SOLIDQ_BIND", "", []),
        (WORKER, [{"threads": 0}], ["threads"]),
        (WORKER, [{"threads": "3"}], ["threads"]),
        (WORKER, [{"processes": 0}], ["processes"]),
        (WORKER, [{"prefetch": -1}], ["prefetch"]),
        (WORKER, [{"prefetch": "3"}], ["prefetch"]),
        (WORKER, [{"prefetch": True}], ["prefetch"]),
        (WORKER, [{"thread": 3}], ["thread"]),
        (WORKER, [{"queues": ""}], ["queues"]),
        (WORKER, [{"queues": " , "}], ["queues"]),
        (WORKER, [{"queues": []}], ["queues"]),
        (WORKER, [{"queues": 5}], ["queues"]),
        (WORKER, [{"queues": ["a", 1]}], ["queues"]),
        (WORKER, [{"polling_interval": 0}], ["polling_interval"]),
        (WORKER, [{"polling_interval": "fast"}], ["polling_interval"]),
        (WORKER, "high,low", []),
        (WORKER, [{"queues": "a"}, "b"], []),
        (DISPATCHER, [{"batch_size": "x"}], ["batch_size"]),
        (DISPATCHER, [{"batch_size": 0}], ["batch_size"]),
        (DISPATCHER, [{"polling_interval": -1}], ["polling_interval"]),
        (DISPATCHER, [{"concurrency_maintenance": "yes"}], ["concurrency_maintenance"]),
        (DISPATCHER, [{"concurrency_maintenance_interval": 0}], ["maintenance_interval"]),
        (DISPATCHER, [{"batchsize": 5}], ["batchsize"]),
        ("SOLIDQ_SHUTDOWN_TIMEOUT", -1, []),
        ("SOLIDQ_SHUTDOWN_TIMEOUT", "5", []),
        ("SOLIDQ_PROCESS_HEARTBEAT_INTERVAL", 0, []),
        ("SOLIDQ_PROCESS_HEARTBEAT_INTERVAL", "60", []),
        ("SOLIDQ_PROCESS_ALIVE_THRESHOLD", -300, []),
        ("SOLIDQ_CLEAR_FINISHED_JOBS_AFTER", "1 day", []),
        ("SOLIDQ_CLEAR_FINISHED_JOBS_AFTER", float("nan"), []),
        ("SOLIDQ_ON_WORKER_DEATH", "explode", []),
        ("SOLIDQ_USE_SKIP_LOCKED", "yes", []),
        ("SOLIDQ_USE_SKIP_LOCKED", 1, []),
        ("SOLIDQ_PRESERVE_FINISHED_JOBS", None, []),
        ("SOLIDQ_DASHBOARD", "false", []),
        ("SOLIDQ_DASHBOARD_URL_PREFIX", "solidq", []),
        ("SOLIDQ_DASHBOARD_URL_PREFIX", None, []),
        ("SOLIDQ_DASHBOARD_BASIC_AUTH", ("u",), []),
        ("SOLIDQ_DASHBOARD_BASIC_AUTH", ("u", "p", "x"), []),
        ("SOLIDQ_DASHBOARD_BASIC_AUTH", ("u", ""), []),
        ("SOLIDQ_DASHBOARD_BASIC_AUTH", "u:p", []),
        ("SOLIDQ_DASHBOARD_BASIC_AUTH", ("u", 1), []),
        ("SOLIDQ_DATABASE_CONNECT_TIMEOUT", 0, ["None"]),
        ("SOLIDQ_DATABASE_CONNECT_TIMEOUT", "10", []),
        ("SOLIDQ_DATABASE_DEAD_CONNECTION_TIMEOUT", -1, ["None"]),
        ("SOLIDQ_DATABASE_STATEMENT_TIMEOUT", float("inf"), []),
        ("SOLIDQ_DATABASE_STATEMENT_TIMEOUT", True, []),
        ("SOLIDQ_DATABASE_PRE_PING", "yes", []),
        (RECURRING, [], []),
        (RECURRING, {"t": "app:job"}, ["'t'"]),
        (RECURRING, {"t": {"schedule": "every minute"}}, ["'t'", "job"]),
        (RECURRING, {"t": {"job": "app:job"}}, ["'t'", "schedule"]),
        (RECURRING, {"t": {"job": "", "schedule": "every minute"}}, ["'t'", "job"]),
        (RECURRING, {"t": {"job": "app:job", "schedule": "   "}}, ["'t'", "schedule"]),
        (RECURRING, {"t": {"job": "a:j", "schedule": "every minute", "every": 1}}, ["every"]),
        (RECURRING, {"t": {"job": "a:j", "schedule": "every minute", "kwargs": [1]}}, ["kwargs"]),
        (RECURRING, {"t": {"job": "a:j", "schedule": "every minute", "priority": "1"}}, ["'t'"]),
    ],
)
def test_a_wrong_value_raises_an_error_naming_the_key(key, value, names):
    with pytest.raises((ValueError, TypeError)) as info:
        load_settings({key: value})
    message = str(info.value)
    assert key in message
    for name in names:
        assert name in message


def test_the_database_timeouts_default_on_and_turn_off_with_none():
    settings = load_settings({})
    assert settings.database_connect_timeout == 10.0
    assert settings.database_dead_connection_timeout == 30.0
    assert settings.database_statement_timeout == 30.0
    assert settings.database_pre_ping is False
    settings = load_settings(
        {
            "SOLIDQ_DATABASE_CONNECT_TIMEOUT": None,
            "SOLIDQ_DATABASE_DEAD_CONNECTION_TIMEOUT": None,
            "SOLIDQ_DATABASE_STATEMENT_TIMEOUT": dt.timedelta(minutes=2),
            "SOLIDQ_DATABASE_PRE_PING": True,
        }
    )
    assert settings.database_connect_timeout is None
    assert settings.database_dead_connection_timeout is None
    assert settings.database_statement_timeout == 120.0
    assert settings.database_pre_ping is True
