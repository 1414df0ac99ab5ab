#!/usr/bin/env python3
"""CDK app of the scheduler: ``npx cdk synth``, ``npx cdk deploy`` (options: README.md, "Deploy to AWS").

Builds the dependency layer first when it is missing or stale (``layers/build.py``, no Docker).
"""

from infra import build_app

app, _stack = build_app()
app.synth()
