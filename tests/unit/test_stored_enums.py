"""The stored enumerations read a value that a newer release writes (a rollback runs the previous
code on the newer rows: README, "Schema changes"): the row is answered with its value, not refused
with a 500."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scheduler.api.serialize import change_json, execution_json
from scheduler.core.domain import Execution, ExecutionStatus, JobState, LeaseKind, Trigger
from scheduler.core.enums import StoredEnum
from scheduler.core.records import ChangeAction, ChangedKind, ChangeEntry, SkipReason

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("kind", [JobState, ExecutionStatus, Trigger, LeaseKind, SkipReason, ChangeAction, ChangedKind])
def test_every_stored_enumeration_reads_a_value_it_does_not_know_as_itself(kind):
    assert issubclass(kind, StoredEnum)
    newer = kind("archived")
    assert isinstance(newer, kind) and newer == "archived" and str(newer) == "archived"
    assert all(newer != member for member in kind)  # none of the declared ones
    assert "archived" not in [member.value for member in kind]  # and not added to them
    assert kind(next(iter(kind)).value) is next(iter(kind))  # the declared ones as before
    with pytest.raises(ValueError):
        kind(3)  # only text is read so


def test_a_change_entry_with_an_action_of_a_newer_release_is_answered():
    row = {"subject": "j", "seq": 1, "at": NOW, "actor": "system", "action": "archive", "version": 2, "diff": {}}
    assert change_json(ChangeEntry.from_row(row))["action"] == "archive"


def test_an_execution_with_a_status_and_trigger_of_a_newer_release_is_answered():
    row = {
        "id": "e",
        "job_id": "j",
        "seq": 1,
        "scheduled_at": NOW,
        "started_at": NOW,
        "attempt": 1,
        "trigger": "webhook",
        "status": "cancelled",
        "skip_reason": "quota",
    }
    answer = execution_json(Execution.from_row(row))
    assert (answer["trigger"], answer["status"], answer["skip_reason"]) == ("webhook", "cancelled", "quota")
