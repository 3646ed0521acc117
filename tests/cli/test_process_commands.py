"""``flask solidq quiet`` and ``stop`` on the rows of ``solidq_processes``: what each writes
(a supervisor's tree), what ``status`` then shows, and the errors: an unknown process, an
ambiguous name, a process already stopping or already quiet, quiet for a dispatcher. (The
processes carrying the commands out: tests/processes/test_process_commands.py.)"""

from __future__ import annotations

import typing as t

import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.timing import utcnow
from tests import support

PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)


def run(app, *args: str):
    return app.test_cli_runner().invoke(args=["solidq", *args])


def add_process(engine: sa.Engine, kind: str, name: str, supervisor_id: int | None = None) -> int:
    with engine.begin() as connection:
        return int(
            connection.execute(
                PROCESSES.insert().values(
                    kind=kind,
                    name=name,
                    pid=4242,
                    hostname="box",
                    supervisor_id=supervisor_id,
                    last_heartbeat_at=utcnow(),
                    created_at=utcnow(),
                )
            ).inserted_primary_key[0]
        )


def a_tree(engine: sa.Engine) -> dict[str, int]:
    supervisor = add_process(engine, "Supervisor(fork)", "supervisor-aa11")
    return {
        "supervisor": supervisor,
        "worker": add_process(engine, "Worker", "worker-bb22", supervisor),
        "other worker": add_process(engine, "Worker", "worker-bb33", supervisor),
        "dispatcher": add_process(engine, "Dispatcher", "dispatcher-cc44", supervisor),
    }


def commands(engine: sa.Engine) -> dict[str, str | None]:
    return {row.name: row.command for row in support.rows(engine, PROCESSES)}


def test_quiet_of_a_supervisor_quiets_its_workers_and_status_shows_them_quieting(app, engine):
    ids = a_tree(engine)

    result = run(app, "quiet", str(ids["supervisor"]))

    assert result.exit_code == 0, result.output
    assert result.output == (
        f"Told Supervisor(fork) supervisor-aa11 (id {ids['supervisor']} on box) to quiet (with 2"
        " of its processes): it claims no more jobs and finishes the ones it runs within a"
        " second or two.\n"
    )
    assert commands(engine) == {
        "supervisor-aa11": "quiet",
        "worker-bb22": "quiet",
        "worker-bb33": "quiet",
        "dispatcher-cc44": None,
    }
    status = run(app, "status").output.splitlines()
    table = status[status.index("Processes") + 2 :][:4]
    assert {line.split()[2]: line.split()[5] for line in table} == {
        "supervisor-aa11": "quieting",
        "worker-bb22": "quieting",
        "worker-bb33": "quieting",
        "dispatcher-cc44": "running",
    }


def test_stop_of_a_supervisor_stops_its_whole_tree_over_a_quiet_worker(app, engine):
    ids = a_tree(engine)
    assert run(app, "quiet", "worker-bb22").exit_code == 0

    result = run(app, "stop", "supervisor-aa11")

    assert result.exit_code == 0, result.output
    assert "to stop (with 3 of its processes): it stops gracefully and is not restarted" in (
        result.output
    )
    assert set(commands(engine).values()) == {"stop"}
    assert ids


def test_a_worker_is_named_by_its_id_its_name_or_the_start_of_its_name(app, engine):
    ids = a_tree(engine)

    assert run(app, "stop", str(ids["worker"])).exit_code == 0
    assert run(app, "quiet", "worker-bb3").exit_code == 0
    assert run(app, "stop", "dispatcher-cc44").exit_code == 0

    assert commands(engine) == {
        "supervisor-aa11": None,
        "worker-bb22": "stop",
        "worker-bb33": "quiet",
        "dispatcher-cc44": "stop",
    }


def test_an_unknown_process_is_an_error_that_points_to_status(app, engine):
    a_tree(engine)

    by_id = run(app, "stop", "999999")
    by_name = run(app, "stop", "worker-zz")

    assert by_id.exit_code == by_name.exit_code == 1
    assert by_id.output == (
        "Error: No registered process has the id 999999; `flask solidq status` lists the"
        " processes.\n"
    )
    assert by_name.output == (
        "Error: No registered process is named 'worker-zz' or has a name starting so;"
        " `flask solidq status` lists the processes.\n"
    )
    assert set(commands(engine).values()) == {None}


def test_a_process_that_cant_be_an_id_or_a_name_is_a_usage_error(app, engine):
    a_tree(engine)

    signed = run(app, "quiet", "+3")
    too_big = run(app, "stop", str(2**63))
    nul = run(app, "stop", "worker\x00")

    assert signed.exit_code == too_big.exit_code == nul.exit_code == 2
    assert "'+3' is not a process id" in signed.output
    assert f"'{2**63}' is not a process id" in too_big.output
    assert "NUL" in nul.output
    assert set(commands(engine).values()) == {None}


def test_an_ambiguous_name_is_an_error_that_lists_the_processes_it_names(app, engine):
    ids = a_tree(engine)

    result = run(app, "quiet", "worker-bb")

    assert result.exit_code == 1
    assert result.output == (
        f"Error: 'worker-bb' names 2 processes: worker-bb22 (id {ids['worker']}, Worker),"
        f" worker-bb33 (id {ids['other worker']}, Worker). Give the process's id.\n"
    )
    assert set(commands(engine).values()) == {None}


def test_a_process_already_stopping_takes_no_command(app, engine):
    ids = a_tree(engine)
    assert run(app, "stop", "supervisor-aa11").exit_code == 0

    for verb in ("stop", "quiet"):
        result = run(app, verb, "worker-bb22")

        assert result.exit_code == 1
        assert result.output == (
            f"Error: Worker worker-bb22 (id {ids['worker']}) is already stopping.\n"
        )


def test_quiet_is_refused_twice_and_for_a_process_that_claims_no_jobs(app, engine):
    ids = a_tree(engine)
    assert run(app, "quiet", "worker-bb22").exit_code == 0

    again = run(app, "quiet", "worker-bb22")
    dispatcher = run(app, "quiet", "dispatcher-cc44")

    assert again.exit_code == dispatcher.exit_code == 1
    assert again.output == (
        f"Error: Worker worker-bb22 (id {ids['worker']}) is already quiet; stop it to end it.\n"
    )
    assert dispatcher.output == (
        f"Error: Dispatcher dispatcher-cc44 (id {ids['dispatcher']}) claims no jobs, so it"
        " can't be quieted: quiet applies to workers and supervisors (their workers). Stop it"
        " instead.\n"
    )
    assert commands(engine)["dispatcher-cc44"] is None


def test_a_name_with_like_wildcards_matches_only_itself(app, engine):
    a_tree(engine)

    result = run(app, "stop", "worker-b_")

    assert result.exit_code == 1
    assert "No registered process is named 'worker-b_'" in result.output
