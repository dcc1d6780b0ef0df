"""What the plan-following assignor puts in the group protocol's user_data fields.

The encoding lives in the wire module the operator shares (`kafka_rebalance_common.wire.user_data`,
where the formats are described); this module keeps the sidecar's import path for it.
"""

from __future__ import annotations

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
    "Claim",
    "Composed",
    "decode_claim",
    "decode_claim_epoch",
    "decode_composed",
    "encode_claim",
    "encode_composed",
    "parse_claim",
    "parse_composed",
]
