"""The metadata every sidecar commit carries: `{"member":"orders-0","epoch":12}`, and
`"policy":"<uid>"` when the document it consumed under named its policy's incarnation.

The sidecar writes it with each offset commit (the epoch its batch was consumed under); the
operator reads it back with the committed offsets. In assign mode it is the hand-over
acknowledgement: a member that committed a revoked partition at the revoking epoch (or later) has
stopped consuming it. Commits from other clients carry other metadata (often ""), so readers treat
a MetadataError as "not acknowledged", never as a failure. Epochs count within one incarnation
of a policy, so a commit that names another incarnation acknowledges nothing.
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
    policy: str = ""  # the uid of the policy incarnation whose document it consumed under

    def acknowledges(self, member: str, epoch: int, policy: str = "") -> bool:
        """Does this commit acknowledge a revoke from `member` at `epoch` of incarnation
        `policy`? A later epoch does too: the member gave the partition up no later than that.
        A commit naming another incarnation never does; one naming none (a sidecar from before
        `policy`) is judged by its epoch, which a new incarnation starts above every committed
        one."""
        if self.policy and policy and self.policy != policy:
            return False
        return self.member == member and self.epoch >= epoch


def encode_commit_metadata(metadata: CommitMetadata) -> str:
    """Compact JSON, `member` first (Kafka stores it as the commit's metadata string)."""
    raw: dict[str, object] = {"member": metadata.member, "epoch": metadata.epoch}
    if metadata.policy:
        raw["policy"] = metadata.policy
    return json.dumps(raw, separators=(",", ":"))


def decode_commit_metadata(text: str | None) -> CommitMetadata:
    """The metadata of a sidecar's commit; MetadataError (naming the field) for anything else.
    Keys other than `member`, `epoch` and `policy` are ignored, so a later sidecar may add some.
    A trailing NUL is ignored: confluent-kafka (the sidecar's librdkafka engine) stores the C
    string's terminator with the text."""
    text = text.rstrip("\x00") if text else text
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
    policy = raw.get("policy", "")
    if not isinstance(policy, str):
        raise MetadataError("policy", "not a string")
    return CommitMetadata(member, epoch, policy)
