"""The base of the enumerations whose values the database stores (states, statuses, triggers,
change actions): they read a value they do not know rather than refuse it."""

from __future__ import annotations

from enum import StrEnum


class StoredEnum(StrEnum):
    """A string enumeration stored in rows. A value that a newer release writes (a new execution
    status, a new change action) is read as a member of its own, equal to its text, where a plain
    ``StrEnum`` would raise: a schema change is expanded before the code that writes the new value
    ships, and a failed deploy rolls the previous code back onto rows that hold it. Such a member
    is equal to no declared one, so the code treats it as "none of these" and answers its text.
    Input is validated before it is turned into one of these (the API's ``Literal`` parameters)."""

    @classmethod
    def _missing_(cls, value: object) -> StoredEnum | None:
        if not isinstance(value, str):
            return None
        member = str.__new__(cls, value)
        member._name_ = value.upper()
        member._value_ = value
        return member
