"""How evidence words a node condition and a span or moment of time, alike in every rule."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta

from mignurse.diagnose.agent_reasons import AHR, agent_reason
from mignurse.evidence._common import clip
from mignurse.model import format_time

# A condition's strings come from whatever wrote the Node's status: a reason is a CamelCase
# word and a message a sentence or two (kubelet's longest, the container runtime's network
# status, is under 200 characters), so anything longer is cut where a finding quotes it.
REASON_LIMIT = 120
MESSAGE_LIMIT = 300


def condition_text(node: str, type_: str, status: str, reason: str, message: str) -> str:
    detail = f" {clip(reason, REASON_LIMIT)}" if reason else ""
    said = f' "{clip(message, MESSAGE_LIMIT)}"' if message else ""
    words = _agent_words(type_, status, reason)
    return f"Node {node}: {clip(type_, REASON_LIMIT)}={clip(status, 16)}{detail}{said}{words}"


def some_of(items: Iterable[str], limit: int = 5) -> str:
    """The first `limit` of the items, each cut to a reason's length, and how many more: a
    summary names a pool's reasons, and 5,000 nodes may each send another."""
    listed = list(dict.fromkeys(items))
    shown = ", ".join(clip(item, REASON_LIMIT) for item in listed[:limit])
    return shown + (f" and {len(listed) - limit} more" if len(listed) > limit else "")


def _agent_words(type_: str, status: str, reason: str) -> str:
    """What the node monitoring agent means by a failing kernel, storage, network or runtime
    condition's reason (mignurse.diagnose.agent_reasons); the accelerated hardware finding
    words its own."""
    if status != "False" or type_ == AHR:
        return ""
    entry = agent_reason(reason)
    if entry is None or entry.condition != type_:
        return ""
    return f" (the node monitoring agent: {entry.meaning}; {entry.replacing})"


def human_duration(delta: timedelta) -> str:
    """12m 5s, 1h 3m, 2d 4h: what an engineer reads at a glance."""
    seconds = int(abs(delta.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s" if secs and minutes < 10 else f"{minutes}m"
    return f"{secs}s"


# The mignurse commands that act on a cluster. Where several clusters are shown together, a
# command suggested for one names its context: run as printed, it would otherwise act on the
# current context, which may be another cluster.
_CLUSTER_COMMAND = re.compile(
    r"(?<![\w-])mignurse (?=(?:collect|diagnose|inventory|nodes|radar|run|unlock|watch)\b)"
)


def with_context(text: str, context: str) -> str:
    """`text` with every mignurse command in it that acts on a cluster (`mignurse collect
    NODE`, `mignurse run cordon --node NODE`) given `--context CONTEXT` first, the context
    quoted for a shell."""
    from shlex import quote

    pinned = f"mignurse --context {quote(context)} "
    return _CLUSTER_COMMAND.sub(lambda _found: pinned, text)


def short_time(when: datetime | None) -> str:
    text = format_time(when)
    return text[11:] if text else "?"  # HH:MM:SSZ: the date is rarely in doubt on call
