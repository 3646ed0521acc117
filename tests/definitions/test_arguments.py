"""Job arguments survive the trip to JSON text and back with equal values and the same types."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import json
import math
import sys
import textwrap
import typing as t
import uuid
import zoneinfo

import pytest
from flask import Flask
from flask_sqlalchemy import SQLAlchemy
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from sqlalchemy.orm import Mapped
from sqlalchemy.orm import mapped_column

from flask_solidq.definitions.arguments import ImportPathError
from flask_solidq.definitions.arguments import MissingRecord
from flask_solidq.definitions.arguments import dump_args
from flask_solidq.definitions.arguments import dump_kwargs
from flask_solidq.definitions.arguments import import_path
from flask_solidq.definitions.arguments import load_args
from flask_solidq.definitions.arguments import load_import_path
from flask_solidq.definitions.arguments import load_kwargs
from flask_solidq.definitions.arguments import register_serializer
from flask_solidq.errors import DeserializationError
from flask_solidq.errors import SerializationError

PARIS = zoneinfo.ZoneInfo("Europe/Paris")

# -- module-level things to store --------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mode(str, enum.Enum):
    READ = "read"
    WRITE = "write"


class Perm(enum.Flag):
    R = 1
    W = 2
    X = 4


class Money:
    def __init__(self, amount: decimal.Decimal, currency: str) -> None:
        self.amount = amount
        self.currency = currency

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and (self.amount, self.currency) == (other.amount, other.currency)  # type: ignore[attr-defined]
        )


class Euros(Money):
    def __init__(self, amount: decimal.Decimal) -> None:
        super().__init__(amount, "EUR")


register_serializer(
    Money,
    lambda money: (money.amount, money.currency),
    lambda stored: Money(*stored),
)


class Point:
    def __init__(self, x: int, y: int) -> None:
        self.x = x
        self.y = y


class Unstorable:
    pass


class Broken:
    pass


def _fail_to_dump(value: Broken) -> t.NoReturn:
    raise RuntimeError("can't dump this")


register_serializer(Broken, _fail_to_dump, lambda stored: Broken())


class Gone:
    pass


register_serializer(Gone, lambda gone: None, lambda stored: _gone(), name="tests.gone")


def _gone() -> t.NoReturn:
    raise DeserializationError("The gone thing is gone.")


db = SQLAlchemy()


class Author(db.Model):  # type: ignore[name-defined,misc]
    __tablename__ = "author"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str]


class Membership(db.Model):  # type: ignore[name-defined,misc]
    __tablename__ = "membership"

    tenant: Mapped[str] = mapped_column(primary_key=True)
    number: Mapped[int] = mapped_column(primary_key=True)
    role: Mapped[str]


# -- helpers -----------------------------------------------------------------------------------


def round_trip(*args: t.Any, **kwargs: t.Any) -> tuple[tuple[t.Any, ...], dict[str, t.Any]]:
    """Store and load as a job would: dump, JSON text (strict: no NaN), parse, load."""
    text = json.dumps([dump_args(args), dump_kwargs(kwargs)], allow_nan=False)
    stored_args, stored_kwargs = json.loads(text)
    return load_args(stored_args), load_kwargs(stored_kwargs)


def round_trip_one(value: t.Any) -> t.Any:
    (loaded,), _ = round_trip(value)
    return loaded


def assert_same(expected: t.Any, actual: t.Any) -> None:
    """Equal, of the same type all the way down; NaN equals NaN; -0.0 is not 0.0."""
    assert type(actual) is type(expected), (expected, actual)
    if isinstance(expected, float):
        if math.isnan(expected):
            assert math.isnan(actual)
        else:
            assert actual == expected
            assert math.copysign(1.0, actual) == math.copysign(1.0, expected)
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected)
        for expected_item, actual_item in zip(expected, actual, strict=True):
            assert_same(expected_item, actual_item)
    elif isinstance(expected, dict):
        assert len(actual) == len(expected)
        for (expected_key, expected_item), (actual_key, actual_item) in zip(
            expected.items(), actual.items(), strict=True
        ):
            assert_same(expected_key, actual_key)
            assert_same(expected_item, actual_item)
    elif isinstance(expected, (set, frozenset)):
        assert actual == expected
        by_value = {item: item for item in actual}
        for item in expected:
            assert_same(item, by_value[item])
    elif isinstance(expected, decimal.Decimal):
        assert str(actual) == str(expected)
    elif isinstance(expected, (dt.datetime, dt.time)):
        assert actual == expected
        assert actual.replace(tzinfo=None) == expected.replace(tzinfo=None)
        assert actual.tzinfo == expected.tzinfo
        assert actual.fold == expected.fold
    else:
        assert actual == expected


def dump_error(*args: t.Any, **kwargs: t.Any) -> SerializationError:
    with pytest.raises(SerializationError) as info:
        dump_args(args)
        dump_kwargs(kwargs)
    return info.value


# -- plain JSON values -------------------------------------------------------------------------


def test_plain_json_values_are_stored_as_they_are() -> None:
    args = ("abc", 1, -2.5, True, None, [1, "x", [None]], {"a": {"b": [1.5]}})
    assert dump_args(args) == list(args)
    assert dump_kwargs({"name": "x", "items": [1, 2]}) == {"name": "x", "items": [1, 2]}


def test_plain_json_values_round_trip() -> None:
    args = ("abc", "", 0, -7, 1.25, -0.0, False, None, [], {}, [1, [2, [3]]], {"k": {"j": "v"}})
    loaded_args, loaded_kwargs = round_trip(*args, text="é✓", empty=[])
    assert_same(args, loaded_args)
    assert_same({"text": "é✓", "empty": []}, loaded_kwargs)


def test_bool_is_not_taken_for_int() -> None:
    assert_same((True, False, 1, 0), round_trip(True, False, 1, 0)[0])


def test_ints_of_any_size_round_trip() -> None:
    values = (2**63, -(2**63) - 1, 2**2000 - 1, 2**2000, -(2**2000), 10**5000, -(7**9000))
    assert_same(values, round_trip(*values)[0])


def test_nan_and_infinities_round_trip_as_strict_json() -> None:
    values = (math.nan, math.inf, -math.inf, 1e308, 5e-324)
    assert_same(values, round_trip(*values)[0])


# -- containers --------------------------------------------------------------------------------


def test_tuples_come_back_as_tuples_even_nested() -> None:
    value = (1, (2, (3, ())), [4, (5,)], {"t": (6, 7)})
    assert_same(value, round_trip_one(value))


def test_sets_and_frozensets_round_trip() -> None:
    values = ({1, "a", (2, 3)}, frozenset({frozenset({1}), None}), set(), frozenset())
    assert_same(values, round_trip(*values)[0])


def test_dicts_with_non_str_keys_keep_their_key_types() -> None:
    value = {1: "int", (1, "a"): "tuple", None: 0, False: [1], 2.5: {}, frozenset({3}): "fs"}
    assert_same(value, round_trip_one(value))


def test_a_dict_with_mixed_keys_keeps_its_order() -> None:
    value = {"b": 1, 2: "two", "a": 3}
    loaded = round_trip_one(value)
    assert_same(value, loaded)
    assert list(loaded) == ["b", 2, "a"]


def test_a_dict_that_contains_the_tag_key_round_trips_as_data() -> None:
    values = (
        {"_sq": "tuple", "v": [1, 2]},
        {"_sq": "nonsense"},
        {"nested": {"_sq": 1, "x": [{"_sq": None}]}},
    )
    assert_same(values, round_trip(*values)[0])


def test_keyword_arguments_may_be_named_like_the_tag_key() -> None:
    _, loaded = round_trip(_sq="tuple", v=[1])
    assert_same({"_sq": "tuple", "v": [1]}, loaded)


def test_bytes_and_bytearrays_round_trip() -> None:
    values = (b"", b"\x00\xffabc", bytes(range(256)), bytearray(b"\x01\x02"))
    assert_same(values, round_trip(*values)[0])


# -- dates and times ---------------------------------------------------------------------------


def test_aware_datetime_keeps_its_exact_offset() -> None:
    offsets = (
        dt.timedelta(0),
        dt.timedelta(hours=5, minutes=30),
        -dt.timedelta(hours=9, seconds=1),
    )
    values = tuple(dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone(o)) for o in offsets)
    loaded = round_trip(*values)[0]
    assert_same(values, loaded)
    assert [v.utcoffset() for v in loaded] == list(offsets)


def test_zoneinfo_datetime_comes_back_in_the_same_zone() -> None:
    value = dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=PARIS)
    stored = dump_args((value,))[0]
    assert stored == {
        "_sq": "datetime",
        "v": "2026-01-02T03:04:05.000006+01:00",
        "tz": "Europe/Paris",
    }
    loaded = round_trip_one(value)
    assert_same(value, loaded)
    assert loaded.tzinfo is PARIS


def test_zoneinfo_datetime_in_the_repeated_hour_keeps_its_fold() -> None:
    first = dt.datetime(2026, 10, 25, 2, 30, tzinfo=PARIS)
    second = first.replace(fold=1)
    loaded_first, loaded_second = round_trip(first, second)[0]
    assert_same(first, loaded_first)
    assert_same(second, loaded_second)
    assert loaded_first.utcoffset() == dt.timedelta(hours=2)
    assert loaded_second.utcoffset() == dt.timedelta(hours=1)


def test_naive_datetime_stays_naive() -> None:
    value = dt.datetime(2026, 1, 2, 3, 4, 5, 6)
    loaded = round_trip_one(value)
    assert_same(value, loaded)
    assert loaded.tzinfo is None


def test_date_is_not_taken_for_datetime_or_the_other_way_round() -> None:
    values = (dt.date(2026, 2, 28), dt.datetime(2026, 2, 28), dt.date.min, dt.date.max)
    assert_same(values, round_trip(*values)[0])


def test_aware_and_naive_times_round_trip() -> None:
    values = (
        dt.time(3, 4, 5, 6),
        dt.time(0, 0),
        dt.time(23, 59, 59, 999999, tzinfo=dt.timezone(dt.timedelta(hours=-3, minutes=-30))),
        dt.time(12, 0, tzinfo=PARIS),
        dt.time(1, 0, fold=1),
    )
    loaded = round_trip(*values)[0]
    assert_same(values, loaded)
    assert loaded[0].tzinfo is None
    assert loaded[3].tzinfo is PARIS


def test_timedeltas_round_trip_exactly() -> None:
    values = (
        dt.timedelta(0),
        dt.timedelta(microseconds=1),
        dt.timedelta(days=-1, microseconds=999999),
        -dt.timedelta(days=3, hours=4, microseconds=5),
        dt.timedelta.max,
        dt.timedelta.min,
    )
    assert_same(values, round_trip(*values)[0])


# -- other scalars -----------------------------------------------------------------------------


def test_decimals_keep_their_precision_and_special_values() -> None:
    texts = ("1.10", "0", "-0", "1E+3", "-123456789.123456789012345678901234567890", "NaN")
    texts += ("-NaN", "sNaN", "Infinity", "-Infinity", "0E-30")
    values = tuple(decimal.Decimal(text) for text in texts)
    loaded = round_trip(*values)[0]
    assert_same(values, loaded)
    assert [str(value) for value in loaded] == [str(decimal.Decimal(text)) for text in texts]


def test_uuids_round_trip() -> None:
    values = (uuid.uuid4(), uuid.UUID(int=0), uuid.UUID("12345678-1234-5678-1234-567812345678"))
    assert_same(values, round_trip(*values)[0])


# -- enums -------------------------------------------------------------------------------------


def test_enum_members_are_stored_by_class_path_and_name() -> None:
    assert dump_args((Color.RED,)) == [{"_sq": "enum", "cls": f"{__name__}:Color", "n": "RED"}]


def test_enum_members_of_every_kind_round_trip() -> None:
    values = (Color.GREEN, Level.HIGH, Mode.WRITE, Perm.W)
    assert_same(values, round_trip(*values)[0])


def test_a_str_enum_is_not_taken_for_a_plain_str() -> None:
    loaded = round_trip_one(Mode.READ)
    assert type(loaded) is Mode
    assert loaded is Mode.READ


def test_an_int_enum_is_not_taken_for_a_plain_int() -> None:
    loaded = round_trip_one({"level": Level.LOW})
    assert loaded["level"] is Level.LOW


@pytest.mark.skipif(sys.version_info < (3, 11), reason="enum.StrEnum is new in Python 3.11")
def test_a_strenum_member_round_trips() -> None:
    size_enum = enum.StrEnum("Size", ["SMALL", "LARGE"], module=__name__)  # type: ignore[attr-defined]
    globals()["Size"] = size_enum
    try:
        loaded = round_trip_one(size_enum.LARGE)
    finally:
        del globals()["Size"]
    assert loaded is size_enum.LARGE


def test_a_flag_combination_round_trips() -> None:
    value = Perm.R | Perm.X
    loaded = round_trip_one(value)
    assert type(loaded) is Perm
    assert loaded == value


def test_an_enum_defined_in_a_function_is_refused_when_stored() -> None:
    class Local(enum.Enum):
        A = 1

    error = dump_error(Local.A)
    assert error.position == "argument 0"
    assert "defined inside a function" in str(error)


def test_an_enum_member_that_no_longer_exists_raises_deserialization_error() -> None:
    stored = [{"_sq": "enum", "cls": f"{__name__}:Color", "n": "PURPLE"}]
    with pytest.raises(DeserializationError, match="PURPLE"):
        load_args(stored)


# -- custom types ------------------------------------------------------------------------------


def test_a_registered_custom_type_round_trips() -> None:
    value = Money(decimal.Decimal("9.90"), "EUR")
    stored = dump_args((value,))[0]
    assert stored["_sq"] == "custom"
    assert stored["name"] == f"{__name__}:Money"
    loaded = round_trip_one(value)
    assert type(loaded) is Money
    assert loaded == value
    assert str(loaded.amount) == "9.90"


def test_a_subclass_of_a_registered_type_uses_its_serializer() -> None:
    loaded = round_trip_one([Euros(decimal.Decimal("1.50"))])
    assert loaded == [Money(decimal.Decimal("1.50"), "EUR")]


def test_registering_a_name_again_replaces_the_pair() -> None:
    register_serializer(Point, lambda p: [p.x, p.y], lambda s: Point(*s), name="tests.point")
    register_serializer(Point, lambda p: {"x": p.x}, lambda s: ("v2", s), name="tests.point")
    assert round_trip_one(Point(1, 2)) == ("v2", {"x": 1})


def test_a_native_type_cant_be_registered() -> None:
    with pytest.raises(TypeError, match="natively"):
        register_serializer(dt.datetime, str, str)


def test_a_failing_dump_function_raises_serialization_error() -> None:
    error = dump_error(1, Broken())
    assert error.position == "argument 1"
    assert "can't dump this" in str(error)
    assert isinstance(error.__cause__, RuntimeError)


def test_a_load_function_can_say_the_value_is_gone() -> None:
    with pytest.raises(DeserializationError, match="gone"):
        round_trip(Gone())


def test_an_unregistered_custom_name_raises_deserialization_error() -> None:
    with pytest.raises(DeserializationError, match="no-such-name"):
        load_args([{"_sq": "custom", "name": "no-such-name", "v": 1}])


# -- nested combinations and properties --------------------------------------------------------


def test_a_nested_combination_of_everything_round_trips() -> None:
    value = {
        "when": [dt.datetime(2026, 3, 29, 2, 30, tzinfo=dt.timezone.utc), dt.date(2026, 1, 1)],
        "amounts": (decimal.Decimal("1.10"), {decimal.Decimal("2")}),
        "ids": {uuid.UUID(int=5): (Color.RED, Level.LOW)},
        (1, 2): frozenset({b"raw", dt.timedelta(seconds=-1)}),
        "money": [Money(decimal.Decimal("0.01"), "USD")],
        "plain": {"_sq": [math.inf, None]},
    }
    args, kwargs = round_trip(value, (value,), deep=[[{"x": value}]])
    assert_same((value, (value,)), args)
    assert_same({"deep": [[{"x": value}]]}, kwargs)


hashable_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=3).map(tuple) | st.frozensets(children, max_size=3)
    ),
    max_leaves=8,
)

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([2**2000 - 1, 2**2000, -(2**2000), 3**9000])
    | st.floats()
    | st.text()
    | st.sampled_from(["_sq", "v", "tuple"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=3) | st.just("_sq"), children, max_size=4)
        | st.dictionaries(st.integers(), children, max_size=4)
        | st.dictionaries(hashable_values, children, max_size=4)
        | st.sets(hashable_values, max_size=4)
        | st.frozensets(hashable_values, max_size=4)
    ),
    max_leaves=20,
)


@settings(database=None, deadline=None)
@given(args=st.lists(values, max_size=4), kwargs=st.dictionaries(st.text(), values, max_size=3))
def test_any_combination_of_plain_values_and_containers_round_trips(
    args: list[t.Any], kwargs: dict[str, t.Any]
) -> None:
    loaded_args, loaded_kwargs = round_trip(*args, **kwargs)
    assert_same(tuple(args), loaded_args)
    assert_same(kwargs, loaded_kwargs)


# -- errors when storing -----------------------------------------------------------------------


def test_an_unstorable_argument_error_names_its_index() -> None:
    error = dump_error("fine", object())
    assert error.position == "argument 1"
    assert str(error).startswith("Can't store argument 1: ")
    assert "object" in str(error)


def test_an_unstorable_keyword_argument_error_names_the_keyword() -> None:
    with pytest.raises(SerializationError) as info:
        dump_kwargs({"ok": 1, "when": dt.timezone.utc})
    assert info.value.position == "keyword argument 'when'"
    assert "keyword argument 'when'" in str(info.value)
    assert "datetime.timezone" in str(info.value)


def test_an_unstorable_value_error_names_its_path_inside_the_argument() -> None:
    error = dump_error({"items": [1, 2, Unstorable()]})
    assert error.position == "argument 0"
    assert "argument 0['items'][2]:" in str(error)
    assert f"{__name__}.Unstorable" in str(error)


def test_the_path_goes_through_tuples_sets_and_odd_keys() -> None:
    error = dump_error([(1, {2: [object()]})])
    assert "argument 0[0][1][2][0]:" in str(error)
    error = dump_error(1, 2, {frozenset({1}): {"x": (object(),)}})
    assert "argument 2[frozenset({1})]['x'][0]:" in str(error)


def test_the_error_says_how_to_fix_it() -> None:
    message = str(dump_error(object()))
    assert "id" in message
    assert "register_serializer(object, dump, load)" in message


def test_a_subclass_of_a_native_type_is_refused_so_its_type_cant_change() -> None:
    class Name(str):
        pass

    error = dump_error(Name("x"))
    assert "subclass of str" in str(error)


def test_a_list_that_contains_itself_raises_serialization_error() -> None:
    looped: list[t.Any] = []
    looped.append(looped)
    error = dump_error(1, looped)
    assert error.position == "argument 1"


def test_a_keyword_name_that_is_not_a_string_raises_serialization_error() -> None:
    with pytest.raises(SerializationError):
        dump_kwargs({1: "x"})  # type: ignore[dict-item]


# -- errors when loading -----------------------------------------------------------------------


def test_an_unknown_tag_raises_deserialization_error() -> None:
    with pytest.raises(DeserializationError, match="'martian'") as info:
        load_args([1, {"_sq": "martian", "v": 1}])
    assert "argument 1" in str(info.value)


def test_a_malformed_tagged_form_raises_deserialization_error() -> None:
    for stored in (
        {"_sq": "datetime", "v": "not a date"},
        {"_sq": "tuple"},
        {"_sq": "decimal", "v": 1.5},
        {"_sq": "bytes", "v": "***"},
        {"_sq": ["list"], "v": 1},
    ):
        with pytest.raises(DeserializationError):
            load_kwargs({"x": stored})


def test_stored_arguments_of_the_wrong_shape_raise_deserialization_error() -> None:
    with pytest.raises(DeserializationError):
        load_args({"not": "a list"})  # type: ignore[arg-type]
    with pytest.raises(DeserializationError):
        load_kwargs([1])  # type: ignore[arg-type]


def test_a_class_path_that_no_longer_exists_raises_deserialization_error() -> None:
    for path in ("solidq_no_such_module:Color", f"{__name__}:NoSuchColor"):
        with pytest.raises(DeserializationError, match=path):
            load_args([{"_sq": "enum", "cls": path, "n": "RED"}])


# -- import paths ------------------------------------------------------------------------------


def test_import_path_round_trips_functions_and_nested_classes() -> None:
    assert import_path(dump_args) == "flask_solidq.definitions.arguments:dump_args"
    assert load_import_path(import_path(dump_args)) is dump_args
    assert load_import_path(import_path(dt.datetime)) is dt.datetime
    assert load_import_path(import_path(json.JSONDecoder.decode)) is json.JSONDecoder.decode


def test_a_local_object_gets_a_path_but_cant_be_loaded() -> None:
    def local() -> None:
        pass

    path = import_path(local)
    assert "<locals>" in path
    with pytest.raises(ImportPathError, match="inside a function"):
        load_import_path(path)


def test_load_import_path_names_what_is_missing() -> None:
    with pytest.raises(ImportPathError, match="no module 'solidq_nope'"):
        load_import_path("solidq_nope.sub:thing")
    with pytest.raises(ImportPathError, match="no attribute 'Color.NOPE'"):
        load_import_path(f"{__name__}:Color.NOPE")
    with pytest.raises(ImportPathError, match="module:qualname"):
        load_import_path("no_colon")


def test_a_missing_dependency_of_an_existing_module_propagates_as_it_is(
    tmp_path: t.Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "solidq_broken_mod.py").write_text(
        textwrap.dedent(
            """
            import solidq_missing_dependency

            def job():
                pass
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as info:
        load_import_path("solidq_broken_mod:job")
    assert not isinstance(info.value, ImportPathError)
    assert info.value.name == "solidq_missing_dependency"


# -- SQLAlchemy models -------------------------------------------------------------------------


@pytest.fixture
def flask_app() -> t.Iterator[Flask]:
    app = Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = "sqlite://"
    db.init_app(app)
    with app.app_context():
        db.create_all()
    yield app
    with app.app_context():
        db.engine.dispose()


@pytest.fixture
def app_context(flask_app: Flask) -> t.Iterator[None]:
    with flask_app.app_context():
        yield


def add_author(name: str = "Ada") -> int:
    author = Author(name=name)
    db.session.add(author)
    db.session.commit()
    return author.id


@pytest.mark.usefixtures("app_context")
def test_a_committed_row_is_stored_by_reference() -> None:
    author_id = add_author()
    author = db.session.get(Author, author_id)
    assert dump_args((author,)) == [
        {"_sq": "model", "cls": f"{__name__}:Author", "pk": [author_id]}
    ]


@pytest.mark.usefixtures("app_context")
def test_a_committed_row_round_trips_as_a_loaded_instance() -> None:
    author_id = add_author("Grace")
    text = json.dumps(dump_kwargs({"author": db.session.get(Author, author_id)}))
    db.session.remove()  # Load with a fresh session, as a worker would.
    loaded = load_kwargs(json.loads(text))["author"]
    assert type(loaded) is Author
    assert loaded.id == author_id
    assert loaded.name == "Grace"


@pytest.mark.usefixtures("app_context")
def test_a_deleted_row_raises_deserialization_error() -> None:
    author_id = add_author()
    text = json.dumps(dump_args((db.session.get(Author, author_id),)))
    db.session.delete(db.session.get(Author, author_id))
    db.session.commit()
    with pytest.raises(DeserializationError) as info:
        load_args(json.loads(text))
    assert isinstance(info.value, MissingRecord)
    assert info.value.model == f"{__name__}:Author"
    assert info.value.primary_key == author_id
    assert f"{__name__}:Author" in str(info.value)


@pytest.mark.usefixtures("app_context")
def test_an_unflushed_instance_raises_serialization_error() -> None:
    pending = Author(name="Unsaved")
    db.session.add(pending)
    with pytest.raises(SerializationError, match="flush or commit") as info:
        dump_args(("x", pending))
    assert info.value.position == "argument 1"
    with pytest.raises(SerializationError, match="primary key"):
        dump_kwargs({"author": Author(name="Transient")})


@pytest.mark.usefixtures("app_context")
def test_a_composite_primary_key_round_trips() -> None:
    db.session.add(Membership(tenant="acme", number=3, role="admin"))
    db.session.commit()
    member = db.session.get(Membership, ("acme", 3))
    text = json.dumps(dump_args(([member],)))
    assert json.loads(text)[0][0]["pk"] == ["acme", 3]
    db.session.remove()
    ((loaded,),) = load_args(json.loads(text))
    assert type(loaded) is Membership
    assert (loaded.tenant, loaded.number, loaded.role) == ("acme", 3, "admin")


@pytest.mark.usefixtures("app_context")
def test_a_missing_composite_key_row_names_the_whole_key() -> None:
    stored = [{"_sq": "model", "cls": f"{__name__}:Membership", "pk": ["acme", 99]}]
    with pytest.raises(MissingRecord) as info:
        load_args(stored)
    assert info.value.primary_key == ("acme", 99)


def test_loading_a_row_needs_an_app_context(flask_app: Flask) -> None:
    with flask_app.app_context():
        author_id = add_author()
        text = json.dumps(dump_args((db.session.get(Author, author_id),)))
    with pytest.raises(DeserializationError, match="app context"):
        load_args(json.loads(text))
