"""Delivery of one execution to its target.

Modules:

- :mod:`scheduler.targets.router`: ``deliver()``, which renders the body's placeholders and
  hands the delivery to the module of the target's type.
- :mod:`scheduler.targets.results`: the shared types (``Outcome``, ``TargetPolicy``; the
  ``Delivery`` identity comes from the domain) and the helpers that build results.
- :mod:`scheduler.targets.watchdog`: the wall-clock deadline of a delivery.
- :mod:`scheduler.targets.http`: HTTP(S) targets (redirects, auth, classification of the
  answer, a wall-clock deadline, a capped response read); :mod:`scheduler.targets.http_wire`:
  HTTP/1.1 on the wire (SSRF-guarded connections kept alive across warm invocations), the
  answers read by :mod:`scheduler.targets.http_answer`.
- :mod:`scheduler.targets.amqp`: AMQP(S) targets (pika, publisher confirms, mandatory
  routing, a small pool of broker connections reused across warm invocations).
- :mod:`scheduler.targets.aws`: Lambda, SQS, SNS and EventBridge targets, and SigV4 signing of
  HTTP targets, as the job's role assumed for its owner (:mod:`scheduler.targets.aws_credentials`;
  their views in :mod:`scheduler.targets.aws_views`).
- :mod:`scheduler.targets.ssrf`: the address guard both use; :mod:`scheduler.targets.idle`: the
  pool of idle connections both keep.

This package module itself imports nothing, so loading one of them loads no other.
See ``docs/delivery.md`` for the retry classification and the delivery semantics.
"""
