"""The metadata every sidecar commit carries: `{"member":"orders-0","epoch":12}`.

The sidecar writes it with each offset commit (the epoch its batch was consumed under); the
operator reads it back with the committed offsets. In assign mode it is the hand-over
acknowledgement: a member that committed a revoked partition at the revoking epoch (or later) has
stopped consuming it. Commits from other clients carry other metadata (often ""), so readers treat
a MetadataError as "not acknowledged", never as a failure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from kafka_rebalance_common.wire.errors import MetadataError


@dataclass(frozen=True)
class CommitMetadata:
    """Who committed, under which plan epoch."""

    member: str
    epoch: int

    def acknowledges(self, member: str, epoch: int) -> bool:
        """Does this commit acknowledge a revoke from `member` at `epoch`? A later epoch does too:
        the member gave the partition up no later than that."""
        return self.member == member and self.epoch >= epoch


def encode_commit_metadata(metadata: CommitMetadata) -> str:
    """Compact JSON, `member` first (Kafka stores it as the commit's metadata string)."""
    return json.dumps({"member": metadata.member, "epoch": metadata.epoch}, separators=(",", ":"))


def decode_commit_metadata(text: str | None) -> CommitMetadata:
    """The metadata of a sidecar's commit; MetadataError (naming the field) for anything else.
    Keys other than `member` and `epoch` are ignored, so a later sidecar may add some."""
    if not text:
        raise MetadataError("input", "empty (not committed by a sidecar)")
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise MetadataError("input", f"not JSON ({error})") from None
    if not isinstance(raw, dict):
        raise MetadataError("input", f"not a JSON object ({type(raw).__name__})")
    member = raw.get("member")
    if not isinstance(member, str):
        raise MetadataError("member", "missing" if member is None else "not a string")
    epoch = raw.get("epoch")
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        raise MetadataError("epoch", "missing" if epoch is None else "not an integer")
    if epoch < 0:
        raise MetadataError("epoch", f"negative ({epoch})")
    return CommitMetadata(member, epoch)
