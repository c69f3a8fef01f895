"""The leader payload as the bindings pass it to the core: a dict encoded as JSON text.

The core checks the text (a JSON object of at most ``MAX_PAYLOAD_BYTES`` bytes, UTF-8) and
stores it with the term (``MongoLeaderElector(payload=...)``); readers decode it back.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional

#: The largest payload, in bytes of its JSON encoding (the core's bound).
MAX_PAYLOAD_BYTES = 16 * 1024

Payload = Optional[Mapping[str, Any]]


def encode(payload: Payload) -> Optional[str]:
    """JSON text of ``payload`` (None: no payload). TypeError when it is not a mapping,
    ValueError when it cannot be encoded as JSON or is larger than the bound."""
    if payload is None:
        return None
    if not isinstance(payload, Mapping):
        raise TypeError(
            "payload must be a JSON object (a dict) or None, not %s" % type(payload).__name__
        )
    try:
        text = json.dumps(dict(payload), separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError("payload %r is not JSON-serialisable: %s" % (payload, exc)) from None
    size = len(text.encode("utf-8"))
    if size > MAX_PAYLOAD_BYTES:
        raise ValueError(
            "payload is %d bytes of JSON, above the limit of %d bytes" % (size, MAX_PAYLOAD_BYTES)
        )
    return text


def decode(text: Optional[str]) -> Optional[Dict[str, Any]]:
    """The dict a payload's JSON text encodes, None for none."""
    return None if text is None else json.loads(text)
