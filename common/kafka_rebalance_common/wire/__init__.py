"""The operator <-> sidecar wire formats, each encoded and decoded in one place.

- `document`: the assignment document the operator writes to each member's ConfigMap
  (versions 1 and 2; `partitions` holds version 2's compact partition sets);
- `commit`: the metadata the sidecar puts on every offset commit (the hand-over acknowledgement);
- `user_data`: the plan-following assignor's subscription and assignment user_data;
- `assignment`: the canonical text of a whole assignment (`status.proposal.assignment`), its
  decoder, and the plan hash made from it.

Decoders raise `WireError` subclasses whose message is one line naming the field. Compatibility
rule: what an earlier release wrote must keep decoding (tests/unit/wire/test_wire_compat.py holds
texts
captured from the encoders before this module existed).
"""

from kafka_rebalance_common.wire.assignment import (
    AssignmentError,
    assignment_hash,
    decode_assignment,
    encode_assignment,
)
from kafka_rebalance_common.wire.commit import (
    CommitMetadata,
    decode_commit_metadata,
    encode_commit_metadata,
)
from kafka_rebalance_common.wire.document import (
    AssignmentDocument,
    decode_document,
    encode_document,
)
from kafka_rebalance_common.wire.errors import (
    DocumentError,
    MetadataError,
    UserDataError,
    WireError,
)
from kafka_rebalance_common.wire.partitions import Partitions
from kafka_rebalance_common.wire.user_data import (
    ASSIGNOR_NAME,
    NO_EPOCH,
    Claim,
    Composed,
    decode_claim,
    decode_claim_epoch,
    decode_composed,
    encode_claim,
    encode_composed,
    parse_claim,
    parse_composed,
)

__all__ = [
    "ASSIGNOR_NAME",
    "NO_EPOCH",
    "AssignmentDocument",
    "AssignmentError",
    "Claim",
    "CommitMetadata",
    "Composed",
    "DocumentError",
    "MetadataError",
    "Partitions",
    "UserDataError",
    "WireError",
    "assignment_hash",
    "decode_assignment",
    "decode_claim",
    "decode_claim_epoch",
    "decode_commit_metadata",
    "decode_composed",
    "decode_document",
    "encode_assignment",
    "encode_claim",
    "encode_commit_metadata",
    "encode_composed",
    "encode_document",
    "parse_claim",
    "parse_composed",
]
