"""Who may use the deployment's default broker (``broker_owners``): owner ARNs matched part by
part, so that a ``*`` never reaches across a ``:`` into the account."""

from __future__ import annotations

from scheduler.core.urls import default_broker_open_to

ACCOUNT = ("arn:*:*::111111111111:*",)


def test_the_principals_of_the_account_and_no_one_else():
    assert default_broker_open_to(ACCOUNT, "arn:aws:iam::111111111111:user/alice")
    assert default_broker_open_to(ACCOUNT, "arn:aws:sts::111111111111:assumed-role/Deployer")
    assert default_broker_open_to(ACCOUNT, "arn:aws-cn:iam::111111111111:user/path/with:colon/bob")
    assert not default_broker_open_to(ACCOUNT, "arn:aws:iam::222222222222:user/bob")
    assert not default_broker_open_to(ACCOUNT, None)


def test_an_iam_path_that_spells_another_account_is_not_of_it():
    """An IAM path may hold ``:``: a user of account 2 whose path spells account 1 matched the
    whole-string glob ``arn:*:*::1:*``."""
    assert not default_broker_open_to(ACCOUNT, "arn:aws:iam::222222222222:user/::111111111111:/mallory")
    assert not default_broker_open_to(ACCOUNT, "arn:aws:iam::222222222222:user/:111111111111:x")


def test_patterns_of_the_operator_and_no_patterns():
    users = ("arn:aws:iam::111111111111:user/team/*",)
    assert default_broker_open_to(users, "arn:aws:iam::111111111111:user/team/carol")
    assert not default_broker_open_to(users, "arn:aws:iam::111111111111:user/other/dave")
    assert not default_broker_open_to(users, "not-an-arn")
    assert default_broker_open_to((), "anyone") and default_broker_open_to((), None)


def test_the_environment_s_patterns_are_arns_or_star_alone():
    import pytest

    from scheduler.settings import Settings

    def owners(text: str) -> tuple[str, ...]:
        return Settings.from_env({"SCHEDULER_DEFAULT_BROKER_OWNERS": text}).default_broker_owners

    assert owners("") == () and owners("*") == ()  # anyone
    assert owners(" arn:*:*::1:* , arn:aws:iam::2:user/x ") == ("arn:*:*::1:*", "arn:aws:iam::2:user/x")
    for bad in ("arn:*", "alice", "*,arn:*:*::1:*"):
        with pytest.raises(ValueError, match="SCHEDULER_DEFAULT_BROKER_OWNERS"):
            owners(bad)
