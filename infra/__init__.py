"""CDK infrastructure of the scheduler: one construct per concern, composed by
``infra.stack.SchedulerStack``.

``build_app`` is what ``app.py`` runs and what the tests synthesize. The package imports the CDK
lazily, so ``infra.shared`` (paths, constants, the layer build) works without the ``infra`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aws_cdk import App

    from infra.stack import SchedulerStack

__all__ = ["build_app"]


def build_app(context: dict[str, Any] | None = None, outdir: str | None = None) -> tuple[App, SchedulerStack]:
    """The CDK app with the scheduler stack and the cdk-nag AwsSolutions checks.

    ``context`` adds to what the CDK CLI passes (``cdk.json`` and ``-c key=value``).
    """
    from aws_cdk import App

    from infra.config import Config
    from infra.nag import add_checks
    from infra.stack import SchedulerStack

    app = App(context=context, outdir=outdir)
    config = Config.from_context(app.node)
    stack = SchedulerStack(app, config.stack_name, config=config)
    add_checks(app)
    return app, stack
