"""The contracts, one module per kind: its signature, cases, reference, tolerance and named
mistakes, the way ONNX keeps one file per operator's test cases (``base`` holds what they share).
"""

from embedding_parity.conformance.kinds.alibi import Alibi
from embedding_parity.conformance.kinds.attention_scale import AttentionScale
from embedding_parity.conformance.kinds.base import (
    BAD_IDS,
    DIM,
    LONG,
    MAX_SEQ_LEN,
    ROPE_DIM,
    VOCAB,
    Case,
    Kind,
    Outcome,
    Verdict,
    low_precision_angles,
)
from embedding_parity.conformance.kinds.bert import Bert
from embedding_parity.conformance.kinds.gradient import Gradient
from embedding_parity.conformance.kinds.invariance import Invariance
from embedding_parity.conformance.kinds.lookup import Lookup
from embedding_parity.conformance.kinds.mrope_positions import MropePositions
from embedding_parity.conformance.kinds.packed_positions import PackedPositions
from embedding_parity.conformance.kinds.pos2d_resize import Pos2dResize, Pos2dResizeInvariance
from embedding_parity.conformance.kinds.pos2d_table import Pos2dTable
from embedding_parity.conformance.kinds.position_ids import PositionIds
from embedding_parity.conformance.kinds.quantized_lookup import QuantizedLookup
from embedding_parity.conformance.kinds.scaled_inputs import ScaledInputs
from embedding_parity.conformance.kinds.rope import Rope
from embedding_parity.conformance.kinds.rope2d import Rope2d, Rope2dInvariance
from embedding_parity.conformance.kinds.rope2d_ids import Rope2dIds
from embedding_parity.conformance.kinds.sinusoidal import Sinusoidal
from embedding_parity.conformance.kinds.t5 import T5

KINDS = {
    kind.name: kind
    for kind in (
        Lookup(),
        QuantizedLookup(),
        ScaledInputs(),
        Sinusoidal(),
        Rope(),
        Alibi(),
        T5(),
        Gradient(),
        PositionIds(),
        PackedPositions(),
        Bert(),
        MropePositions(),
        AttentionScale(),
        Pos2dResize(),
        Pos2dTable(),
        Rope2d(),
        Rope2dIds(),
        Invariance("rope"),
        Invariance("lookup"),
        Pos2dResizeInvariance(),
        Rope2dInvariance(),
    )
}

__all__ = [
    "BAD_IDS",
    "DIM",
    "KINDS",
    "LONG",
    "MAX_SEQ_LEN",
    "ROPE_DIM",
    "VOCAB",
    "Case",
    "Kind",
    "Outcome",
    "Verdict",
    "low_precision_angles",
]
