"""The API's ``details`` of a refused body: pydantic's errors as ``{"field", "message"}``, the
field a dotted path (``target.headers.X-A``), in the API's own words (``messages``)."""

from __future__ import annotations

from pydantic import ValidationError

from scheduler.schema.aws_models import AWS_TARGET_TYPES
from scheduler.schema.messages import FieldError, plain_message


def validation_details(exc: ValidationError) -> list[dict[str, str]]:
    """The API's ``details`` list: one ``{"field", "message"}`` per error, dotted field paths."""
    details = []
    for err in exc.errors(include_url=False):
        loc = [str(p) for p in err.get("loc", ())]
        # Discriminated unions add the tag to the path ("target.http.url"): drop it.
        if "target" in loc:
            at = loc.index("target") + 1
            if len(loc) > at and loc[at] in ("http", "amqp", *AWS_TARGET_TYPES):
                loc.pop(at)
        if "auth" in loc:
            i = loc.index("auth")
            if len(loc) > i + 1 and loc[i + 1] in ("basic", "bearer", "header", "sigv4"):
                loc.pop(i + 1)
        message = plain_message(err)
        original = (err.get("ctx") or {}).get("error")
        if err.get("type") in ("union_tag_invalid", "union_tag_not_found"):
            ctx = err.get("ctx") or {}
            loc.append(ctx.get("discriminator", "'type'").strip("'"))
            known = ", ".join(("http", "amqp", *AWS_TARGET_TYPES))
            message = f"must be one of {ctx.get('expected_tags', known)}"
            if err.get("type") == "union_tag_not_found":
                message = f"is required: one of {known}"
        elif isinstance(original, FieldError):
            loc = loc + [original.field] if not loc or loc[-1] != original.field else loc
            message = original.message
        details.append({"field": ".".join(loc) or "body", "message": message})
    return details
