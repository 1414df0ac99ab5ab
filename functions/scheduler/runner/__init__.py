"""The runner: the fan-out loop (one invocation of the fan-out function, helper fan-outs),
the two dispatch pipelines, the executor (start, deliver, record a claim) and its telemetry."""
